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
    if kind == "Secret":
        core = client.CoreV1Api(api)
        return _KindApi(core.read_namespaced_secret, core.patch_namespaced_secret)
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


def apply(
    api: client.ApiClient, desired: dict[str, Any], *, precondition: str | None = None
) -> Applied:
    """Converge one object to `desired` with server-side apply (force: we own it).

    With `precondition` (a resourceVersion) the apply fails with 409 Conflict unless the
    object is still at that version: for a writer whose decision depends on what it read
    (the replicas), so two writers cannot undo each other. Without it, a read before the
    apply only names the outcome in logs and events."""
    kind = desired["kind"]
    name = desired["metadata"]["name"]
    namespace = desired["metadata"]["namespace"]
    ops = _kind_api(api, kind)
    before: str | None = precondition
    if precondition is not None:
        desired = {**desired, "metadata": {**desired["metadata"], "resourceVersion": precondition}}
    else:
        try:
            before = _resource_version(ops.read(name, namespace))
        except ApiException as err:
            if err.status != 404:
                raise
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


@dataclass(frozen=True)
class Running:
    """What a Deployment runs now, and the version that was read."""

    replicas: int
    resource_version: str


def running(dep: Any) -> Running | None:
    meta, spec = getattr(dep, "metadata", None), getattr(dep, "spec", None)
    if meta is None or spec is None or meta.resource_version is None:
        return None
    return Running(replicas=int(spec.replicas or 0), resource_version=meta.resource_version)


def read_deployment(api: client.ApiClient, *, namespace: str, name: str) -> Running | None:
    """The Deployment's replicas and resourceVersion, or None when it does not exist."""
    try:
        dep = client.AppsV1Api(api).read_namespaced_deployment(name, namespace)
    except ApiException as err:
        if err.status == 404:
            return None
        raise
    return running(dep)
