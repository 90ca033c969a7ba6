"""Reading a ModelDeployment's pods and writing its status subresource."""

from __future__ import annotations

from typing import Any, cast

from kubernetes import client

from modelscale.api.v1alpha1 import GROUP, PLURAL, VERSION

MERGE_PATCH = "application/merge-patch+json"


def patch_status(
    api: client.ApiClient, *, namespace: str, name: str, status: dict[str, Any]
) -> None:
    """JSON-merge-patch `status`: keys this writer does not set are left to their owners."""
    client.CustomObjectsApi(api).patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, PLURAL, name, {"status": status}, _content_type=MERGE_PATCH
    )


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
