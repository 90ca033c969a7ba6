"""kopf handlers that converge a ModelDeployment's children and report its status: every
event runs the same level-based pass (`loops.reconcile`).

Only the leader reconciles. On a follower the ModelDeployment handler waits (async, no
thread held) until this replica leads, then reconciles the object as it is *then* (read
again: the event's body may be long out of date). Waiting instead of failing keeps kopf
from recording anything in the object's status while we are not the leader — a follower's
retry bookkeeping would otherwise be read by the leader's kopf as its own."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

import kopf
from kubernetes.client.exceptions import ApiException

from modelscale.api.v1alpha1 import GROUP, PLURAL, VERSION
from modelscale.handlers import runtime
from modelscale.kube import reads
from modelscale.kube.lease import NotLeaderError
from modelscale.loops import reconcile as loop
from modelscale.resources import names


def _reconcile(
    rt: runtime.Runtime, body: Mapping[str, Any], *, child_generation: int | None = None
) -> None:
    try:
        loop.reconcile(
            rt.api,
            body,
            now=time.time(),
            allow_privileged=rt.config.allow_privileged_pods,
            cache=rt.cache,
            child_generation=child_generation,
        )
    except loop.InvalidSpecError as err:
        raise kopf.PermanentError(str(err)) from err
    except loop.RetryError as err:
        raise kopf.TemporaryError(str(err), delay=err.delay) from err


def _fetch(rt: runtime.Runtime, *, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        return reads.fetch_modeldeployment(rt.api, namespace=namespace, name=name)
    except ApiException as err:
        raise kopf.TemporaryError(
            f"reading ModelDeployment {namespace}/{name}: {err.reason}", delay=5
        ) from err


async def _as_leader(rt: runtime.Runtime, body: Mapping[str, Any]) -> None:
    """Reconcile `body` once this replica leads (re-read if we had to wait for that)."""
    meta = body.get("metadata", {})
    namespace, name = meta.get("namespace", ""), meta.get("name", "")
    current: Mapping[str, Any] | None = body
    while True:
        if not rt.leader.holds():
            await rt.leader.wait()
            current = await asyncio.to_thread(_fetch, rt, namespace=namespace, name=name)
        if current is None:
            return  # deleted meanwhile
        try:
            await asyncio.to_thread(_reconcile, rt, current)
            return
        except NotLeaderError:
            continue  # the lease lapsed mid-pass: the next leader (maybe us) does it


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
async def modeldeployment_reconcile(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    await _as_leader(runtime.of(memo), body)


@kopf.on.event("apps", "v1", "deployments", labels={names.LABEL_MANAGED_BY: names.MANAGED_BY})
def child_deployment_event(
    event: Mapping[str, Any], body: kopf.Body, memo: kopf.Memo, **_: Any
) -> None:
    """A child Deployment changed (rollout progress, someone edited or deleted it):
    converge and refresh the owner's status. Followers leave it to the leader (whose
    resync on takeover covers what happened before)."""
    owner = body.get("metadata", {}).get("labels", {}).get(names.LABEL_MODELDEPLOYMENT)
    namespace = body.get("metadata", {}).get("namespace")
    if not owner or not namespace:
        return
    rt = runtime.of(memo)
    if not rt.leader.holds():
        return
    # A status-only change (same generation as our last apply) refreshes only the owner's
    # status; a deletion or a spec change (a hand edit) converges the children.
    generation = body.get("metadata", {}).get("generation")
    deleted = event.get("type") == "DELETED"
    # For a status-only refresh the watch's copy when it has one (a GET per Deployment
    # event was a third of a rollout's calls; a stale copy only costs a 409 and a re-read
    # on the status write). To converge the children, a fresh read: a stale copy's
    # spec.replicas applied to the Deployment deleted a pod a new leader was warming.
    status_only = not deleted and loop.answers_status_only((namespace, owner), generation)
    cached = rt.cache.modeldeployment((namespace, owner)) if status_only else None
    md_body = cached or _fetch(rt, namespace=namespace, name=owner)
    if md_body is None:
        return  # the owner is gone; garbage collection removes the child
    try:
        _reconcile(rt, md_body, child_generation=None if deleted else generation)
    except (kopf.PermanentError, NotLeaderError):
        return  # already reported on the ModelDeployment / the next leader converges it
