"""Names, labels and owner references shared by every child of a ModelDeployment.

Naming: the Deployment, the Service and the PodDisruptionBudget of ModelDeployment NAME are
all called NAME (one of each kind per ModelDeployment, so no suffix is needed, and the
Service name is the DNS name users expect: NAME.NAMESPACE.svc). Pods are NAME-<hash>-<id>.
"""

from __future__ import annotations

from typing import Any

from modelscale.api import v1alpha1
from modelscale.api.v1alpha1 import ModelDeployment

LABEL_NAME = "app.kubernetes.io/name"
LABEL_INSTANCE = "app.kubernetes.io/instance"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_MODELDEPLOYMENT = "modelscale.dev/modeldeployment"

APP_NAME = "modelscale-triton"
MANAGED_BY = "modelscale"

# Triton's ports, named as the Service, probes and Prometheus scrape configs refer to them.
PORTS: dict[str, int] = {"http": 8000, "grpc": 8001, "metrics": 8002}

SCRAPE_ANNOTATIONS: dict[str, str] = {
    "prometheus.io/scrape": "true",
    "prometheus.io/port": str(PORTS["metrics"]),
    "prometheus.io/path": "/metrics",
}


def deployment(md: ModelDeployment) -> str:
    return md.name


def service(md: ModelDeployment) -> str:
    return md.name


def pdb(md: ModelDeployment) -> str:
    return md.name


def selector(md: ModelDeployment) -> dict[str, str]:
    """Selects the pods of this ModelDeployment (and nothing else: one label, immutable)."""
    return {LABEL_MODELDEPLOYMENT: md.name}


def selector_string(md: ModelDeployment) -> str:
    """The selector as `status.selector` (read by the `/scale` subresource, HPA, KEDA)."""
    return ",".join(f"{key}={value}" for key, value in sorted(selector(md).items()))


def labels(md: ModelDeployment) -> dict[str, str]:
    """Labels on every child object and pod."""
    return {
        LABEL_NAME: APP_NAME,
        LABEL_INSTANCE: md.name,
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_MODELDEPLOYMENT: md.name,
    }


def owner(md: ModelDeployment) -> dict[str, Any]:
    """Owner reference: deleting the ModelDeployment garbage-collects the child."""
    return {
        "apiVersion": v1alpha1.API_VERSION,
        "kind": v1alpha1.KIND,
        "name": md.name,
        "uid": md.metadata.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def metadata(md: ModelDeployment, *, name: str) -> dict[str, Any]:
    """Metadata of a child object."""
    return {
        "name": name,
        "namespace": md.namespace,
        "labels": labels(md),
        "ownerReferences": [owner(md)],
    }
