"""Strings beyond U+FFFF survive server-side apply (issue 10).

The kubernetes client's `json.dumps` escapes a character beyond the Basic Multilingual
Plane (an emoji, a CJK extension B ideograph) as a JSON surrogate pair, and the apiserver
decodes apply patches as YAML, whose decoder refuses such escapes: a ModelDeployment with
an emoji in an env value got no children at all. Here a real apiserver reconciles one whose
env values and pod annotations hold such strings, next to the BMP characters YAML treats
specially (NEL, LINE SEPARATOR, DEL, BOM: raw in a quoted YAML string the first two
would fold into a space), and its Deployment carries every string unchanged.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes import client

from modelscale.api import v1alpha1
from modelscale.control import status as md_status
from modelscale.loops import reconcile

pytestmark = pytest.mark.cluster

STRINGS = {
    "EMOJI": "🚀 llama 🦙",
    "CJK_EXT_B": "𠀀𠮷𪚥",
    "MATH": "𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
    "YAML_SPECIAL": "é\u0085a\u2028b\u2029c\x7f\ufeff\ufffd 👍",
    "LAST_PLANE": "\U0010fffd\U000e0001",
}


@pytest.fixture(scope="module")
def deployment(installed: None, kube_api: client.ApiClient, module_namespace: str) -> Any:
    """The Deployment one reconcile pass made for a ModelDeployment holding `STRINGS`."""
    custom = client.CustomObjectsApi(kube_api)
    custom.create_namespaced_custom_object(
        v1alpha1.GROUP,
        v1alpha1.VERSION,
        module_namespace,
        v1alpha1.PLURAL,
        {
            "apiVersion": f"{v1alpha1.GROUP}/{v1alpha1.VERSION}",
            "kind": "ModelDeployment",
            "metadata": {"name": "unicode", "namespace": module_namespace},
            "spec": {
                "model": {"name": "toy_llm", "repository": "/models"},
                # External with 0 replicas: the children are made, no Triton pod is started.
                "scaling": {"mode": "External"},
                "minReplicas": 0,
                "replicas": 0,
                "server": {
                    "env": [{"name": k, "value": v} for k, v in STRINGS.items()],
                    "podTemplate": {
                        "annotations": {f"example.com/{k.lower()}": v for k, v in STRINGS.items()}
                    },
                },
            },
        },
    )
    body = _stored(kube_api, module_namespace)
    reconcile.reconcile(kube_api, body, now=time.time())
    return client.AppsV1Api(kube_api).read_namespaced_deployment("unicode", module_namespace)


def _stored(api: client.ApiClient, namespace: str) -> dict[str, Any]:
    stored: dict[str, Any] = client.CustomObjectsApi(api).get_namespaced_custom_object(
        v1alpha1.GROUP, v1alpha1.VERSION, namespace, v1alpha1.PLURAL, "unicode"
    )
    return stored


def _env(dep: Any) -> dict[str, str]:
    return {e.name: e.value for c in dep.spec.template.spec.containers for e in c.env or []}


def test_env_values_beyond_the_bmp_reach_the_pods_unchanged(deployment: Any) -> None:
    env = _env(deployment)
    assert {k: env.get(k) for k in STRINGS} == STRINGS


def test_pod_annotations_beyond_the_bmp_reach_the_pods_unchanged(deployment: Any) -> None:
    annotations = deployment.spec.template.metadata.annotations
    assert {k: annotations.get(f"example.com/{k.lower()}") for k in STRINGS} == STRINGS


def test_a_second_pass_changes_nothing(
    deployment: Any, kube_api: client.ApiClient, module_namespace: str
) -> None:
    """The strings read back equal what is applied again: no update on every resync."""
    reconcile.reconcile(kube_api, _stored(kube_api, module_namespace), now=time.time())
    again = client.AppsV1Api(kube_api).read_namespaced_deployment("unicode", module_namespace)
    assert again.metadata.resource_version == deployment.metadata.resource_version
    # ... and the status write that ends the pass took the same spec (no InvalidSpec, no
    # ApplyFailed).
    status = _stored(kube_api, module_namespace).get("status", {})
    reasons = {c["type"]: c.get("reason") for c in status.get("conditions", [])}
    assert md_status.APPLY_FAILED not in reasons.values(), status
    assert md_status.INVALID_SPEC not in reasons.values(), status
