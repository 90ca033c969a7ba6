"""Reading a ModelDeployment's pods and writing its status subresource."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, cast

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from modelscale.api.v1alpha1 import GROUP, PLURAL, VERSION

MERGE_PATCH = "application/merge-patch+json"


def patch_status(
    api: client.ApiClient, *, namespace: str, name: str, status: dict[str, Any]
) -> None:
    """JSON-merge-patch `status`: keys this writer does not set are left to their owners."""
    client.CustomObjectsApi(api).patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, PLURAL, name, {"status": status}, _content_type=MERGE_PATCH
    )


def patch_status_guarded(
    api: client.ApiClient,
    *,
    body: Mapping[str, Any],
    build: Callable[[list[dict[str, Any]]], dict[str, Any]],
    attempts: int = 3,
) -> None:
    """Merge-patch the status `build(conditions)` computes from the conditions of the
    object as it was read, only if the object is still at that resourceVersion. A merge
    patch replaces the conditions list whole, so two writers that each own some condition
    types would otherwise put back each other's old ones; on a conflict, read again and
    rebuild."""
    meta = body["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    version = meta.get("resourceVersion")
    existing = list((body.get("status") or {}).get("conditions") or [])
    for attempt in range(attempts):
        patch: dict[str, Any] = {"status": build(existing)}
        if version:
            patch["metadata"] = {"resourceVersion": version}
        try:
            client.CustomObjectsApi(api).patch_namespaced_custom_object_status(
                GROUP, VERSION, namespace, PLURAL, name, patch, _content_type=MERGE_PATCH
            )
            return
        except ApiException as err:
            if err.status != 409 or attempt == attempts - 1:
                raise
        fresh = get_modeldeployment(api, namespace=namespace, name=name)
        version = fresh["metadata"].get("resourceVersion")
        existing = list((fresh.get("status") or {}).get("conditions") or [])


def list_pods(
    api: client.ApiClient, *, namespace: str | None, selector: str
) -> list[dict[str, Any]]:
    """Pods matching `selector` as plain dicts (camelCase, as the API sends them)."""
    core = client.CoreV1Api(api)
    if namespace is None:
        result = core.list_pod_for_all_namespaces(label_selector=selector)
    else:
        result = core.list_namespaced_pod(namespace, label_selector=selector)
    raw = api.sanitize_for_serialization(result)  # type: ignore[no-untyped-call]
    return cast(list[dict[str, Any]], raw["items"])


def get_modeldeployment(api: client.ApiClient, *, namespace: str, name: str) -> dict[str, Any]:
    body = client.CustomObjectsApi(api).get_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, name
    )
    return cast(dict[str, Any], body)


def list_modeldeployments(
    api: client.ApiClient, *, namespaces: list[str] | None
) -> list[dict[str, Any]]:
    objects = client.CustomObjectsApi(api)
    if not namespaces:
        result = cast(dict[str, Any], objects.list_cluster_custom_object(GROUP, VERSION, PLURAL))
        return cast(list[dict[str, Any]], result["items"])
    out: list[dict[str, Any]] = []
    for ns in namespaces:
        result = cast(
            dict[str, Any], objects.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)
        )
        out.extend(result["items"])
    return out
