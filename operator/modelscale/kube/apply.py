"""Server-side apply of the children a ModelDeployment owns, with an explicit outcome.

One field manager for everything the operator writes, so that a hand edit of a field we
own is taken back on the next pass ("converge, don't create-if-missing") while fields
other managers own (an admission webhook's, say) are left alone.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

FIELD_MANAGER = "modelscale"
APPLY_CONTENT_TYPE = "application/apply-patch+yaml"

log = logging.getLogger(__name__)


class Outcome(enum.StrEnum):
    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"


@dataclass(frozen=True)
class Applied:
    kind: str
    name: str
    outcome: Outcome


@dataclass(frozen=True)
class _KindApi:
    read: Callable[..., Any]
    patch: Callable[..., Any]


def _kind_api(api: client.ApiClient, kind: str) -> _KindApi:
    if kind == "Deployment":
        apps = client.AppsV1Api(api)
        return _KindApi(apps.read_namespaced_deployment, apps.patch_namespaced_deployment)
    if kind == "Service":
        core = client.CoreV1Api(api)
        return _KindApi(core.read_namespaced_service, core.patch_namespaced_service)
    if kind == "PodDisruptionBudget":
        policy = client.PolicyV1Api(api)
        return _KindApi(
            policy.read_namespaced_pod_disruption_budget,
            policy.patch_namespaced_pod_disruption_budget,
        )
    raise ValueError(f"modelscale does not apply objects of kind {kind!r}")


def _resource_version(obj: Any) -> str | None:
    meta = getattr(obj, "metadata", None)
    return getattr(meta, "resource_version", None)


def apply(api: client.ApiClient, desired: dict[str, Any]) -> Applied:
    """Converge one object to `desired` with server-side apply (force: we own it).

    The read before the apply is only to name the outcome in logs and events."""
    kind = desired["kind"]
    name = desired["metadata"]["name"]
    namespace = desired["metadata"]["namespace"]
    ops = _kind_api(api, kind)
    try:
        before: str | None = _resource_version(ops.read(name, namespace))
    except ApiException as err:
        if err.status != 404:
            raise
        before = None
    after = ops.patch(
        name,
        namespace,
        desired,
        field_manager=FIELD_MANAGER,
        force=True,
        _content_type=APPLY_CONTENT_TYPE,
    )
    if before is None:
        outcome = Outcome.CREATED
    elif _resource_version(after) == before:
        outcome = Outcome.UNCHANGED
    else:
        outcome = Outcome.UPDATED
    log.info("%s %s/%s %s", kind, namespace, name, outcome)
    return Applied(kind=kind, name=name, outcome=outcome)


def deployment_replicas(api: client.ApiClient, *, namespace: str, name: str) -> int | None:
    """`spec.replicas` of a Deployment, or None when it does not exist yet."""
    try:
        dep = client.AppsV1Api(api).read_namespaced_deployment(name, namespace)
    except ApiException as err:
        if err.status == 404:
            return None
        raise
    replicas: int | None = dep.spec.replicas
    return replicas
