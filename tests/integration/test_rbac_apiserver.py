"""Why the chart grants `create` next to `patch` on the children: on the real apiserver, a
server-side apply that creates an object is authorized as create too (the audit log
shows only the PATCH), while updating an existing object needs patch alone."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from modelscale.kube import apply as kube_apply

pytestmark = pytest.mark.cluster


def as_service_account(kubeconfig: Any, namespace: str, verbs: list[str]) -> client.ApiClient:
    """An API client impersonating a ServiceAccount that may only `verbs` Services."""
    admin = config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
    rbac = client.RbacAuthorizationV1Api(admin)
    name = "-".join(verbs)
    client.CoreV1Api(admin).create_namespaced_service_account(
        namespace, {"metadata": {"name": name}}
    )
    rbac.create_namespaced_role(
        namespace,
        {"metadata": {"name": name},
         "rules": [{"apiGroups": [""], "resources": ["services"], "verbs": verbs}]},
    )  # fmt: skip
    rbac.create_namespaced_role_binding(
        namespace,
        {"metadata": {"name": name},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]},
    )  # fmt: skip
    admin.close()
    api = config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
    api.set_default_header("Impersonate-User", f"system:serviceaccount:{namespace}:{name}")
    return api


def service(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "llama", "namespace": namespace},
        "spec": {"ports": [{"name": "http", "port": 8000}]},
    }


def test_server_side_apply_of_a_new_object_needs_create(
    kubeconfig_path: Any, namespace: str, wait_for: Any
) -> None:
    patch_only = as_service_account(kubeconfig_path, namespace, ["get", "patch"])
    with_create = as_service_account(kubeconfig_path, namespace, ["get", "patch", "create"])
    # RBAC caches refresh within a second or so of the bindings' creation.
    created = wait_for(
        lambda: kube_apply.apply(with_create, service(namespace)),
        timeout=20,
        what="server-side apply of a new Service with get, patch and create",
    )
    assert created.outcome is kube_apply.Outcome.CREATED
    wait_for(
        lambda: client.CoreV1Api(patch_only).read_namespaced_service("llama", namespace),
        timeout=20,
        what="the get+patch ServiceAccount's Role in effect",
    )
    other = {**service(namespace), "metadata": {"name": "other", "namespace": namespace}}
    with pytest.raises(ApiException) as caught:
        kube_apply.apply(patch_only, other)
    assert caught.value.status == 403
    assert 'cannot create resource "services"' in json.loads(caught.value.body)["message"]
    # An existing object: patch suffices.
    changed = service(namespace)
    changed["metadata"]["labels"] = {"changed": "yes"}
    assert kube_apply.apply(patch_only, changed).outcome is kube_apply.Outcome.UPDATED
