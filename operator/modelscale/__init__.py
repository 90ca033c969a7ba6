"""modelscale: serve models with Triton on Kubernetes and scale them ahead of demand."""

GROUP = "modelscale.dev"
VERSION = "v1alpha1"
KIND = "ModelDeployment"
PLURAL = "modeldeployments"
