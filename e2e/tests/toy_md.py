"""The toy model's ModelDeployment, shared by the e2e tests that deploy it: the toy_llm
model from /models in Triton 24.10 on one (fake) GPU, quick to drain and to terminate."""

from __future__ import annotations

from typing import Any

from harness.kubectl import Kubectl
from modelscale import podfacts

TRITON_IMAGE = "nvcr.io/nvidia/tritonserver:24.10-py3"


def toy_model(backend: str) -> dict[str, Any]:
    """`backend`: "vllm" has the operator read the toy's vllm:* metrics with the vLLM
    presets; "python" has it read Triton's own."""
    return {"name": "toy_llm", "repository": "/models", "backend": backend}


def toy_server(env: dict[str, str]) -> dict[str, Any]:
    return {
        "image": TRITON_IMAGE,
        "gpus": 1,
        "env": [{"name": k, "value": v} for k, v in env.items()],
        "drainSeconds": 1,
        "terminationGracePeriodSeconds": 10,
    }


def modeldeployment_body(name: str, namespace: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "modelscale.dev/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def pods_of(kubectl: Kubectl, ns: str, name: str) -> list[dict[str, Any]]:
    """The ModelDeployment's pods that are not terminating."""
    items: list[dict[str, Any]] = kubectl.json(
        "-n", ns, "get", "pods", "-l", f"{podfacts.MD_LABEL}={name}"
    )["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]
