"""Reading what the loops need from Kubernetes, as few list calls per pass as possible:
ModelDeployments, their pods (plain camelCase dicts, as the API sends them) and what
their Deployments run."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, cast

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from modelscale.api.v1alpha1 import GROUP, PLURAL, VERSION
from modelscale.kube.apply import Running, running
from modelscale.resources import names

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace, name) of a ModelDeployment


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


def list_modeldeployment_pods(
    api: client.ApiClient, *, namespaces: Sequence[str]
) -> list[dict[str, Any]]:
    """Every pod of every ModelDeployment in `namespaces` (empty: all namespaces)."""
    if not namespaces:
        return list_pods(api, namespace=None, selector=names.LABEL_MODELDEPLOYMENT)
    out: list[dict[str, Any]] = []
    for ns in namespaces:
        out.extend(list_pods(api, namespace=ns, selector=names.LABEL_MODELDEPLOYMENT))
    return out


def list_ready_nodes(api: client.ApiClient) -> frozenset[str] | None:
    """Names of the nodes whose Ready condition is True, or None when the operator may not
    list nodes (an install without that rule: every node then counts as ready)."""
    try:
        result = client.CoreV1Api(api).list_node()
    except ApiException as err:
        if err.status == 403:
            log.warning(
                "cannot list nodes (%s): pods on NotReady nodes count as capacity", err.reason
            )
            return None
        raise
    ready: set[str] = set()
    for node in result.items:
        conditions = (node.status.conditions if node.status else None) or ()
        name = node.metadata.name if node.metadata else None
        if name and any(c.type == "Ready" and c.status == "True" for c in conditions):
            ready.add(name)
    return frozenset(ready)


def read_pod(api: client.ApiClient, *, namespace: str, name: str) -> dict[str, Any]:
    """One pod as a plain dict; raises ApiException 404 if it is gone."""
    pod = client.CoreV1Api(api).read_namespaced_pod(name, namespace)
    return cast(dict[str, Any], api.sanitize_for_serialization(pod))  # type: ignore[no-untyped-call]


def list_running(api: client.ApiClient, *, namespaces: Sequence[str]) -> dict[Key, Running]:
    """What each ModelDeployment's Deployment runs, by ModelDeployment."""
    apps = client.AppsV1Api(api)
    selector = f"{names.LABEL_MANAGED_BY}={names.MANAGED_BY}"
    lists = (
        [apps.list_deployment_for_all_namespaces(label_selector=selector)]
        if not namespaces
        else [apps.list_namespaced_deployment(ns, label_selector=selector) for ns in namespaces]
    )
    out: dict[Key, Running] = {}
    for result in lists:
        for dep in result.items:
            meta = dep.metadata
            owner = (meta.labels or {}).get(names.LABEL_MODELDEPLOYMENT) if meta else None
            now_running = running(dep)
            if meta and owner and meta.namespace and now_running:
                out[(meta.namespace, owner)] = now_running
    return out


def get_modeldeployment(api: client.ApiClient, *, namespace: str, name: str) -> dict[str, Any]:
    body = client.CustomObjectsApi(api).get_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, name
    )
    return cast(dict[str, Any], body)


def fetch_modeldeployment(
    api: client.ApiClient, *, namespace: str, name: str
) -> dict[str, Any] | None:
    """The ModelDeployment's body, or None when it does not exist."""
    try:
        return get_modeldeployment(api, namespace=namespace, name=name)
    except ApiException as err:
        if err.status == 404:
            return None
        raise


def list_modeldeployments(
    api: client.ApiClient, *, namespaces: Sequence[str]
) -> list[dict[str, Any]]:
    """ModelDeployments in `namespaces` (empty: all namespaces)."""
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
