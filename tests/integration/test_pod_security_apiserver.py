"""The Triton pods on the real kube-apiserver's Pod Security admission: in a namespace
that enforces `restricted`, the pod the operator builds by default is admitted, and the
operator's allow-list agrees with the admission plugin case by case: what the operator
refuses the apiserver refuses too (so with `--allow-privileged-pods` such pods need a
namespace that allows them), and what the operator lets through the apiserver admits."""

from __future__ import annotations

import importlib.util
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from modelscale.resources import deployment

pytestmark = pytest.mark.cluster


def _cases() -> ModuleType:
    """The unit test's tables of refused and allowed overrides (one list, two judges)."""
    path = Path(__file__).parents[1] / "unit" / "resources" / "test_podsecurity.py"
    spec = importlib.util.spec_from_file_location("podsecurity_cases", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CASES = _cases()
INVALID_WITHOUT_HOST_FIELDS = (
    "`hostUsers` must be false to use `Unmasked`",
    "hostNetwork must be true if pod contains any hostProcess containers",
)


@pytest.fixture(scope="module")
def restricted(kube_api: Any) -> Iterator[str]:
    """One namespace for the module, enforcing Pod Security `restricted` (latest)."""
    core = client.CoreV1Api(kube_api)
    name = f"t-restricted-{uuid.uuid4().hex[:5]}"
    labels = {
        "modelscale.dev/test": "true",
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/enforce-version": "latest",
    }
    core.create_namespace({"metadata": {"name": name, "labels": labels}})
    yield name
    core.delete_namespace(name, propagation_policy="Background")


def dry_run_pod(kube_api: Any, namespace: str, override: dict[str, Any] | None) -> None:
    """Create (server-side dry run: admission runs, nothing is stored) the pod the built
    Deployment's template would give."""
    template = deployment.build(CASES.md(override), replicas=1)["spec"]["template"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "llama-server-test", "labels": template["metadata"]["labels"]},
        "spec": template["spec"],
    }
    client.CoreV1Api(kube_api).create_namespaced_pod(namespace, pod, dry_run="All")


def test_the_default_triton_pod_is_admitted_under_restricted(
    kube_api: Any, restricted: str
) -> None:
    dry_run_pod(kube_api, restricted, None)


@pytest.mark.parametrize("override", CASES.ALLOWED)
def test_what_the_operator_allows_restricted_admits(
    kube_api: Any, restricted: str, override: dict[str, Any]
) -> None:
    dry_run_pod(kube_api, restricted, override)


@pytest.mark.parametrize(("override", "field"), CASES.REFUSED)
def test_what_the_operator_refuses_restricted_refuses(
    kube_api: Any, restricted: str, override: dict[str, Any], field: str
) -> None:
    with pytest.raises(ApiException) as caught:
        dry_run_pod(kube_api, restricted, override)
    message = json.loads(caught.value.body)["message"]
    if caught.value.status == 422:
        # Refused by Pod validation before admission: an unmasked /proc needs
        # `hostUsers: false` and a host-process container `hostNetwork: true`, which the
        # override cannot set. Refused all the same.
        assert any(why in message for why in INVALID_WITHOUT_HOST_FIELDS), message
        return
    assert caught.value.status == 403, message
    assert 'violates PodSecurity "restricted:latest"' in message
