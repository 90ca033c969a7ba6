"""kopf indexes that back `kube.cache`: the loops read ModelDeployments, their pods and
their Deployments from kopf's watches instead of listing them every pass. Index handlers
are async and light (kopf runs them for every event before any other handler)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kopf

from modelscale import podfacts, telemetry
from modelscale.api.v1alpha1 import GROUP, PLURAL, VERSION
from modelscale.handlers import runtime
from modelscale.kube.apply import Running
from modelscale.loops import reconcile
from modelscale.podfacts import MD_LABEL, PodFacts
from modelscale.resources import names

Key = tuple[str, str]

PODS = "modelscale_pods"
MODELDEPLOYMENTS = "modelscale_modeldeployments"
RUNNING = "modelscale_running"


@kopf.index("", "v1", "pods", labels={MD_LABEL: kopf.PRESENT}, id=PODS)
async def modelscale_pods(body: kopf.Body, **_: Any) -> dict[Key, PodFacts]:
    # Node readiness is applied when read (`ready_nodes`): nodes change without pod events.
    facts = podfacts.read(body)
    if not facts.modeldeployment:
        return {}
    return {(facts.namespace, facts.modeldeployment): facts}


# What the loops never read of a ModelDeployment's body: the apiserver's field
# ownership, kubectl's copy of the whole object, and kopf's own bookkeeping in status (its
# copy of the spec). Kept, they held the whole watch event alive for every object.
UNREAD_METADATA = frozenset({"managedFields"})
UNREAD_ANNOTATIONS = frozenset({"kubectl.kubernetes.io/last-applied-configuration"})
UNREAD_STATUS = frozenset({"kopf"})


def slim(body: Mapping[str, Any]) -> dict[str, Any]:
    """The body as the loops read it (ModelDeployment.model_validate, the status compared
    before a write, an event's involvedObject), without what they never read."""
    meta = {k: v for k, v in (body.get("metadata") or {}).items() if k not in UNREAD_METADATA}
    annotations = meta.get("annotations")
    if isinstance(annotations, Mapping) and UNREAD_ANNOTATIONS & annotations.keys():
        meta["annotations"] = {k: v for k, v in annotations.items() if k not in UNREAD_ANNOTATIONS}
    out = {k: v for k, v in body.items() if k not in ("metadata", "status")}
    out["metadata"] = meta
    status = body.get("status")
    if isinstance(status, Mapping):
        out["status"] = {k: v for k, v in status.items() if k not in UNREAD_STATUS}
    return out


@kopf.index(GROUP, VERSION, PLURAL, id=MODELDEPLOYMENTS)
async def modelscale_modeldeployments(
    body: kopf.Body, namespace: str | None, name: str | None, **_: Any
) -> dict[Key, dict[str, Any]]:
    return {(namespace or "", name or ""): slim(body)}


@kopf.index(
    "apps", "v1", "deployments", labels={names.LABEL_MANAGED_BY: names.MANAGED_BY}, id=RUNNING
)
async def modelscale_running(body: kopf.Body, **_: Any) -> dict[Key, Running]:
    meta = body.get("metadata") or {}
    owner = (meta.get("labels") or {}).get(names.LABEL_MODELDEPLOYMENT)
    version = meta.get("resourceVersion")
    if not owner or not version or not meta.get("namespace"):
        return {}
    replicas = int((body.get("spec") or {}).get("replicas") or 0)
    return {(meta["namespace"], owner): Running(replicas=replicas, resource_version=version)}


@kopf.on.event(GROUP, VERSION, PLURAL)
async def modeldeployment_seen(
    event: Mapping[str, Any], namespace: str | None, name: str | None, memo: kopf.Memo, **_: Any
) -> None:
    """kopf calls resource handlers only once every index has been listed in full, so the
    first call means the caches are complete. A deleted ModelDeployment's metric series
    go (else /metrics keeps every ModelDeployment that ever existed)."""
    rt = runtime.of(memo)
    rt.cache.synced.set()
    if event.get("type") == "DELETED" and namespace and name:
        telemetry.forget(namespace=namespace, name=name)
        reconcile.forget((namespace, name))


def attach(rt: runtime.Runtime, indices: Mapping[str, Any]) -> None:
    """Hand kopf's index objects (kwargs of a startup handler) to the shared cache."""
    rt.cache.attach(
        pods=indices[PODS], modeldeployments=indices[MODELDEPLOYMENTS], running=indices[RUNNING]
    )
