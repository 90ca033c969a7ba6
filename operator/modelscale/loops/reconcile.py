"""One reconcile pass of a ModelDeployment: converge its children, then write its status.

Level-based: create, update, resume, a periodic resync and any change of a child
Deployment all run the same pass, so a missed event or a hand edit is repaired. Errors
come out as `InvalidSpecError` (do not retry: the user must fix the spec) or `RetryError` (try
again after `delay` seconds); the kopf handlers turn them into kopf's own."""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError

from modelscale import podfacts
from modelscale.api.v1alpha1 import Condition, ModelDeployment, ModelDeploymentStatus
from modelscale.config import OperatorConfig
from modelscale.control import replicas, status, validation
from modelscale.kube import apply as kube_apply
from modelscale.kube import events, reads
from modelscale.kube import status as kube_status
from modelscale.kube.cache import Cache
from modelscale.loops import control_key
from modelscale.resources import deployment, names, pdb, podsecurity, service

log = logging.getLogger(__name__)


class InvalidSpecError(Exception):
    """The spec cannot be parsed; the message says what to fix."""


class RetryError(Exception):
    """A temporary failure: reconcile again after `delay` seconds."""

    def __init__(self, message: str, *, delay: float) -> None:
        super().__init__(message)
        self.delay = delay


def parse(body: Mapping[str, Any]) -> ModelDeployment:
    try:
        return ModelDeployment.model_validate(dict(body))
    except ValidationError as err:
        raise InvalidSpecError(f"invalid ModelDeployment: {validation.short(err)}") from err


def children(md: ModelDeployment, *, replicas_: int) -> list[dict[str, Any]]:
    return [deployment.build(md, replicas=replicas_), service.build(md), pdb.build(md)]


@dataclass(frozen=True)
class _Applied:
    digest: str
    versions: dict[str, kube_apply.Known]


# What each ModelDeployment's children were when the apiserver last took all of them: a
# digest, since the all-or-none dry run (one call per child) is needed only when they
# differ (a new spec, a new replicas count, a new operator version's builders), and each
# child's version, so the apply needs no read to name its outcome. In memory: a restarted
# operator dry-runs and reads each ModelDeployment's children once again.
_LAST_APPLIED: dict[tuple[str, str], _Applied] = {}


def _digest(objects: Sequence[Mapping[str, Any]]) -> str:
    text = json.dumps(objects, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def forget(key: tuple[str, str]) -> None:
    """A ModelDeployment was deleted: drop what was remembered of it."""
    _LAST_APPLIED.pop(key, None)


def _apply_children(
    api: client.ApiClient,
    md: ModelDeployment,
    *,
    involved: dict[str, Any],
    replicas_: int,
    current: kube_apply.Running | None,
    now: float,
) -> tuple[list[kube_apply.Applied], str | None]:
    """Apply the control key's Secret and the children, all or none: what was applied,
    and why nothing was (None: applied)."""
    key = (md.namespace, md.name)
    # The Deployment's replicas were decided from what was read: apply only if nobody (the
    # scaling loop) changed it since, or we would undo their scale.
    guards = {"Deployment": current} if current else {}
    try:
        # The control key's Secret first: the pods cannot start without it.
        secret = control_key.desired_secret(api, md)
        desired = [secret, *children(md, replicas_=replicas_)]
        digest = _digest(desired)
        # Popped first: if this apply fails anywhere, the next one dry-runs and reads again.
        last = _LAST_APPLIED.pop(key, None)
        applied_all = kube_apply.apply_all(
            api,
            desired,
            preconditions=guards,
            dry_run=last is None or last.digest != digest,
            known=last.versions if last is not None else None,
        )
        _LAST_APPLIED[key] = _Applied(
            digest=digest, versions={a.kind: a.version for a in applied_all if a.version}
        )
    except kube_apply.ChildRefusedError as err:
        # Nothing was applied: a half-made set (GPU pods, no Service) is worse than none.
        apply_error = (
            f"the apiserver refused the {err.kind} {err.name} built from this spec, so no "
            f"child was applied: {err.reason:.500}"
        )
        events.post(
            api,
            involved=involved,
            type_="Warning",
            reason=status.APPLY_FAILED,
            message=apply_error,
            now=now,
        )
        return [], apply_error
    except ApiException as err:
        if err.status == 409:
            raise _DeploymentMovedError from err
        raise RetryError(f"applying children failed: {err.reason}", delay=10) from err
    return applied_all, None


class _DeploymentMovedError(Exception):
    """The Deployment's version was not the one the replicas were chosen from (409)."""


@dataclass(frozen=True)
class _Attempt:
    choice: replicas.ReplicaChoice
    applied: list[kube_apply.Applied]
    error: str | None


def answers_status_only(key: tuple[str, str], child_generation: int | None) -> bool:
    """A child Deployment event at the generation our last apply left: only its status
    moved, so the children need no apply (see `converge`)."""
    last = _LAST_APPLIED.get(key)
    ours = last.versions.get("Deployment") if last is not None else None
    return child_generation is not None and ours is not None and ours.generation == child_generation


def converge(
    api: client.ApiClient,
    md: ModelDeployment,
    body: Mapping[str, Any],
    *,
    now: float,
    cache: Cache | None = None,
    child_generation: int | None = None,
) -> None:
    """Apply the children, then write the status once. `child_generation`: the
    generation of the child Deployment whose event this pass answers; when it is the one
    our last apply left, only its status moved (a pod became ready, ...): the children are
    as we applied them, so only the status is refreshed. During a rollout of 1,000
    ModelDeployments, re-applying every child on every Deployment status change was
    most of the operator's calls."""
    involved = dict(body)
    key = (md.namespace, md.name)
    status_only = answers_status_only(key, child_generation)
    # The Deployment as the watch last saw it (a resync of 1,000 read each one: ≈ 110
    # GETs a minute at steady state); its version guards the apply, so a stale copy
    # costs a 409 and one read, never an older replicas count written back.
    cached = cache.running_of(key) if cache is not None else None
    current = cached or kube_apply.read_deployment(
        api, namespace=md.namespace, name=names.deployment(md)
    )

    def attempt(current: kube_apply.Running | None) -> _Attempt:
        choice = replicas.choose(
            md.spec,
            status_desired=md.status.desired_replicas if md.status else None,
            running=current.replicas if current else None,
        )
        if status_only:
            return _Attempt(choice=choice, applied=[], error=None)
        applied, error = _apply_children(
            api, md, involved=involved, replicas_=choice.replicas, current=current, now=now
        )
        return _Attempt(choice=choice, applied=applied, error=error)

    try:
        try:
            done = attempt(current)
        except _DeploymentMovedError:
            if cached is None:
                raise
            done = attempt(  # the watch's copy was behind: read it once
                kube_apply.read_deployment(api, namespace=md.namespace, name=names.deployment(md))
            )
    except _DeploymentMovedError as err:
        raise RetryError("the Deployment changed while reconciling", delay=1) from err
    choice, applied_all, apply_error = done.choice, done.applied, done.error
    for applied in applied_all:
        if applied.outcome is not kube_apply.Outcome.UNCHANGED:
            events.post(
                api,
                involved=involved,
                type_="Normal",
                reason=f"{applied.kind}{applied.outcome.value.capitalize()}",
                message=f"{applied.kind} {applied.name} {applied.outcome.value}"
                + (f" with {choice.replicas} replicas" if applied.kind == "Deployment" else ""),
                now=now,
            )
    cached_pods = cache.pods_of(key) if cache is not None else None
    pods = (
        cached_pods
        if cached_pods is not None
        else [
            podfacts.read(p)
            for p in reads.list_pods(
                api, namespace=md.namespace, selector=names.selector_string(md)
            )
        ]
    )
    # The scaling loop owns desiredReplicas in Predictive mode; writing what this pass read
    # could put back an older decision.
    keep_desired = md.spec.scaling.mode != "Predictive"

    def build(existing: Sequence[Condition]) -> ModelDeploymentStatus:
        new_status = status.compute(
            md,
            desired=choice.replicas,
            pods=pods,
            apply_error=apply_error,
            now=now,
            existing_conditions=existing,
        )
        if keep_desired:
            return new_status
        fields = new_status.model_dump(exclude_unset=True, exclude={"desired_replicas"})
        return ModelDeploymentStatus.model_validate(fields)

    kube_status.patch_status_guarded(api, body=body, build=build)


def _report_invalid(
    api: client.ApiClient, body: Mapping[str, Any], *, message: str, now: float
) -> None:
    """A spec that slipped past the schema: say so in status (once, not on every resync)."""
    meta = body.get("metadata", {})
    generation = meta.get("generation")
    previous = kube_status.conditions_of(body)
    invalid = status.invalid_spec(previous, message=message, generation=generation, now=now)
    if invalid.conditions == previous:
        return
    kube_status.patch_status_guarded(
        api,
        body=body,
        build=lambda conds: status.invalid_spec(
            conds, message=message, generation=generation, now=now
        ),
    )
    events.post(
        api,
        involved=dict(body),
        type_="Warning",
        reason=status.INVALID_SPEC,
        message=message,
        now=now,
    )


class KeyedLocks:
    """One lock per ModelDeployment. kopf runs sync handlers in a thread pool, so on
    creation the create handler and the first child-Deployment event ran two passes at
    once: both read the Service and PDB as absent, both applied, and both posted
    `ServiceCreated` / `PodDisruptionBudgetCreated`. Serialised, the second pass sees the
    children and reports them unchanged. Different ModelDeployments still run in parallel."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[tuple[str, str], threading.Lock] = {}

    @contextmanager
    def hold(self, key: tuple[str, str]) -> Iterator[None]:
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            yield


_PASSES = KeyedLocks()


def reconcile(
    api: client.ApiClient,
    body: Mapping[str, Any],
    *,
    now: float,
    allow_privileged: bool = False,
    cache: Cache | None = None,
    child_generation: int | None = None,
) -> None:
    """Reconcile one ModelDeployment body. Raises InvalidSpecError (after reporting it in
    status) or RetryError. A spec whose pods would break Pod Security `restricted` is
    refused (nothing applied) unless `allow_privileged` (the operator's flag).
    `child_generation`: see `converge`."""
    if body.get("metadata", {}).get("deletionTimestamp"):
        # Being deleted (foreground deletion lingers): recreating children would bring GPU
        # pods back and block the deletion.
        return
    try:
        md = parse(body)
    except InvalidSpecError as err:
        _report_invalid(api, body, message=str(err), now=now)
        raise
    refused = podsecurity.refusal(md, allow_privileged=allow_privileged)
    if refused is not None:
        _report_invalid(api, body, message=refused, now=now)
        raise InvalidSpecError(refused)
    try:
        with _PASSES.hold((md.namespace, md.name)):
            converge(api, md, body, now=now, cache=cache, child_generation=child_generation)
    except ApiException as err:
        raise RetryError(f"Kubernetes API error: {err.status} {err.reason}", delay=10) from err


def _as_now(cache: Cache, listed: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The watch's copy as it is now, not as when the resync began: at --resync-qps a
    resync of 1,000 takes ten minutes, and a status patch from a copy that old was refused
    (409) and read again for every ModelDeployment written meanwhile."""
    meta = listed["metadata"]
    return cache.modeldeployment((meta.get("namespace", ""), meta.get("name", "")))


def resync_all(
    api: client.ApiClient, *, config: OperatorConfig, now: float, cache: Cache | None = None
) -> None:
    """Reconcile every ModelDeployment once: repairs drift in children whose changes we
    do not watch (a hand-edited Service or PDB). Run periodically by the scaling loop's
    task, not by a kopf timer: kopf puts a finalizer on every object a timer runs for,
    and a finalizer on the user's object is drift for GitOps and blocks deletion while
    the operator is down."""
    cached = cache.modeldeployments() if cache is not None else None
    bodies = (
        cached
        if cached is not None
        else reads.list_modeldeployments(api, namespaces=config.namespaces)
    )
    for listed in bodies:
        body = _as_now(cache, listed) if cache is not None and cached is not None else listed
        if body is None:
            continue  # deleted meanwhile
        try:
            reconcile(
                api, body, now=now, allow_privileged=config.allow_privileged_pods, cache=cache
            )
        except Exception as err:  # one ModelDeployment must not stop the others' resync
            log.warning(
                "resync of %s/%s: %s",
                body["metadata"].get("namespace"),
                body["metadata"].get("name"),
                err,
            )
