"""kopf handlers that warm new pods up and open their `modelscale.dev/warmed-up` gate.

Why `kopf.on.event` plus our own registry of in-flight warm-ups, and not `kopf.daemon`:
kopf puts a finalizer on every object a daemon or timer runs for. On pods that means a pod
cannot go away while the operator is down (scale-down and rollouts hang). Events need no
finalizer and give us what a daemon would:
- cancelled when the pod is deleted: a DELETED event or a deletionTimestamp stops it;
- resumed after an operator restart: kopf lists all pods at start, every pod whose gate is
  not True yet gets a fresh warm-up (the attempt counter lives in a pod annotation).

Blocking work (tritonclient, the Kubernetes client) runs in bounded thread pools, so many
pods warming at once never block kopf's event loop or the other handlers.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import kopf
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from prometheus_client import Counter, Gauge, Histogram

from modelscale.api import v1alpha1
from modelscale.handlers import shared
from modelscale.kube import events
from modelscale.warmup import client as warmup_client
from modelscale.warmup import plan

log = logging.getLogger(__name__)

# Warm-ups running at once; more wait for a slot (each may use `concurrency` threads more).
MAX_CONCURRENT_WARMUPS = 16
# How often warmed pods' load is sampled for their deletion cost.
LOAD_REFRESH_SECONDS = 30.0
STRATEGIC_MERGE = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"

_WARMUPS = ThreadPoolExecutor(max_workers=MAX_CONCURRENT_WARMUPS, thread_name_prefix="warmup")
# Short Kubernetes API calls; kept apart so a queue of warm-ups never delays a status write.
_API = ThreadPoolExecutor(max_workers=4, thread_name_prefix="warmup-api")

_START_BUCKETS = (1, 2, 5, 10, 20, 30, 45, 60, 90, 120, 180, 300, 600, 1200, 1800, 3600)
SECONDS_TO_WARM = Histogram(
    "modelscale_pod_seconds_to_warm",
    "Pod creation to warmed (containers ready plus warm-up)",
    ["namespace", "modeldeployment"],
    buckets=_START_BUCKETS,
)
SECONDS_TO_READY = Histogram(
    "modelscale_pod_seconds_to_ready",
    "Pod creation to containers ready (scheduling, image, model load)",
    ["namespace", "modeldeployment"],
    buckets=_START_BUCKETS,
)
WARMUP_DURATION = Histogram(
    "modelscale_warmup_duration_seconds",
    "Wall time of one warm-up attempt",
    ["namespace", "modeldeployment"],
    buckets=(0.1, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600),
)
WARMUPS = Counter(
    "modelscale_warmups",
    "Warm-up attempts by outcome reason (WarmedUp, WarmUpFailed, ModelNotReady, ...)",
    ["namespace", "modeldeployment", "reason"],
)
PODS_REPLACED = Counter(
    "modelscale_warmup_pods_replaced",
    "Pods deleted after failing warm-up maxAttempts times",
    ["namespace", "modeldeployment"],
)
IN_FLIGHT = Gauge("modelscale_warmups_in_flight", "Warm-ups running or waiting for a slot")


@dataclasses.dataclass
class InFlight:
    task: asyncio.Task[None]
    stop: threading.Event
    namespace: str
    name: str


@dataclasses.dataclass
class LoadSample:
    host: str
    count: float
    time: float
    rate: float | None = None


# In-flight warm-ups by pod uid; read and written on the event loop only.
REGISTRY: dict[str, InFlight] = {}
# Warmed pods whose load we sample: uid -> (namespace, name, host, last sample).
_WARMED: dict[str, tuple[str, str, LoadSample | None]] = {}
_LAST_FACTS: dict[str, plan.PodFacts] = {}
_GIVING_UP: set[str] = set()

T = TypeVar("T")


async def _api(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_API, functools.partial(fn, *args, **kwargs))


def _core() -> k8s.CoreV1Api:
    return k8s.CoreV1Api(shared.api_client())


# --------------------------------------------------------------------------- API calls


def fetch_modeldeployment(namespace: str, name: str) -> dict[str, Any] | None:
    try:
        api = k8s.CustomObjectsApi(shared.api_client())
        body = api.get_namespaced_custom_object(
            v1alpha1.GROUP, v1alpha1.VERSION, namespace, v1alpha1.PLURAL, name
        )
    except ApiException as err:
        if err.status == 404:
            return None
        raise
    if not isinstance(body, dict):
        return None
    return {str(k): v for k, v in body.items()}


def fetch_pod(facts: plan.PodFacts) -> plan.PodFacts:
    """Fresh facts (camelCase JSON, as kopf gives bodies); raises ApiException 404 if gone."""
    pod = _core().read_namespaced_pod(facts.name, facts.namespace)
    body = shared.api_client().sanitize_for_serialization(pod)  # type: ignore[no-untyped-call]
    fresh = plan.pod_facts(body)
    if fresh.uid != facts.uid:
        raise ApiException(status=409, reason=f"pod {facts.name} was replaced")
    return fresh


def patch_condition(facts: plan.PodFacts, condition: Mapping[str, Any]) -> None:
    _core().patch_namespaced_pod_status(
        facts.name,
        facts.namespace,
        plan.status_patch(condition, uid=facts.uid),
        _content_type=STRATEGIC_MERGE,
    )


def patch_annotations(facts: plan.PodFacts, annotations: Mapping[str, str | None]) -> None:
    """Merge patch: a None value removes the annotation."""
    if not annotations:
        return
    _core().patch_namespaced_pod(
        facts.name,
        facts.namespace,
        {"metadata": {"uid": facts.uid, "annotations": dict(annotations)}},
        _content_type=MERGE,
    )


def delete_pod(facts: plan.PodFacts) -> None:
    try:
        _core().delete_namespaced_pod(
            facts.name,
            facts.namespace,
            body=k8s.V1DeleteOptions(preconditions=k8s.V1Preconditions(uid=facts.uid)),
        )
    except ApiException as err:
        if err.status not in (404, 409):
            raise


def _pod_ref(facts: plan.PodFacts) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": facts.name, "namespace": facts.namespace, "uid": facts.uid},
    }


def _md_ref(md: Mapping[str, Any]) -> dict[str, Any]:
    return {"apiVersion": v1alpha1.API_VERSION, "kind": v1alpha1.KIND, **md}


def post_event(involved: dict[str, Any], *, warning: bool, reason: str, message: str) -> None:
    events.post(
        shared.api_client(),
        involved=involved,
        type_="Warning" if warning else "Normal",
        reason=reason,
        message=message,
        now=time.time(),
    )


# --------------------------------------------------------------------------- the warm-up


async def _write_condition(
    facts: plan.PodFacts, *, ok: bool, reason: str, message: str, now: float | None = None
) -> plan.PodFacts:
    """Write the gate condition; returns the facts with it, so that the next write keeps
    lastTransitionTime while the status stays the same."""
    condition = plan.warmed_condition(
        status=ok,
        reason=reason,
        message=message,
        now=time.time() if now is None else now,
        previous=facts.warmed_condition,
    )
    await _api(patch_condition, facts, condition)
    return dataclasses.replace(facts, warmed_condition=condition)


async def _give_up(
    facts: plan.PodFacts, md: Mapping[str, Any] | None, *, reason: str, message: str
) -> None:
    """After maxAttempts: say so on the pod and the ModelDeployment, and delete the pod so
    the Deployment replaces it (a fresh pod may land on a healthy node)."""
    if facts.uid in _GIVING_UP:
        return
    _GIVING_UP.add(facts.uid)
    text = f"pod {facts.name}: {message}; deleting it so that it is replaced"
    log.warning("%s/%s: %s", facts.namespace, facts.name, text)
    await _api(post_event, _pod_ref(facts), warning=True, reason=plan.REASON_GAVE_UP, message=text)
    if md is not None:
        await _api(post_event, _md_ref(md), warning=True, reason=plan.REASON_GAVE_UP, message=text)
    PODS_REPLACED.labels(facts.namespace, facts.modeldeployment or "").inc()
    WARMUPS.labels(facts.namespace, facts.modeldeployment or "", reason).inc()
    await _api(delete_pod, facts)


# Spec problems are re-checked this often: a fix to `warmUp` does not change the pod
# template, so no pod event would tell us about it.
SPEC_RECHECK_SECONDS = 30.0


async def _wait_for_a_fix(
    facts: plan.PodFacts, md: Mapping[str, Any], message: str
) -> plan.PodFacts:
    """The warm-up cannot be planned from the spec: keep the gate closed, say why on the
    pod and (once) on the ModelDeployment, and look at the spec again later."""
    if plan.condition_differs(
        facts.warmed_condition, status=False, reason=plan.REASON_INVALID_REQUEST, message=message
    ):
        facts = await _write_condition(
            facts, ok=False, reason=plan.REASON_INVALID_REQUEST, message=message
        )
        await _api(
            post_event,
            _md_ref(md),
            warning=True,
            reason=plan.REASON_INVALID_REQUEST,
            message=f"pod {facts.name}: {message}",
        )
    await asyncio.sleep(SPEC_RECHECK_SECONDS)
    return facts


def _target(facts: plan.PodFacts, model: str) -> warmup_client.Target:
    assert facts.ip is not None
    return warmup_client.Target(host=facts.ip, model=model)


async def _record_warmed(facts: plan.PodFacts, *, attempts: int, now: float) -> None:
    # `now` is taken just before the gate opened: creation + seconds-to-warm never lies
    # after the moment traffic could first arrive.
    updates = plan.annotation_updates(facts, now=now, load=None, warmed=True, attempts=attempts)
    await _api(patch_annotations, facts, updates)
    md = facts.modeldeployment or ""
    warm = updates.get(plan.ANNOTATION_SECONDS_TO_WARM)
    if warm is not None:
        SECONDS_TO_WARM.labels(facts.namespace, md).observe(float(warm))
    if facts.ip is not None:
        _WARMED[facts.uid] = (facts.namespace, facts.name, None)


async def warm_up(facts: plan.PodFacts, stop: threading.Event) -> None:
    """Warm one pod up, retrying with backoff; the gate opens only on success."""
    facts = await _api(fetch_pod, facts)  # the attempt counter may have moved meanwhile
    if not plan.needs_warmup(facts):
        return
    md_name = facts.modeldeployment or ""
    attempts = facts.attempts
    while True:
        md = await _api(fetch_modeldeployment, facts.namespace, md_name)
        if md is None:
            log.info(
                "%s/%s: ModelDeployment %s is gone; not warming",
                facts.namespace,
                facts.name,
                md_name,
            )
            return
        try:
            settings = plan.settings_from_spec(md.get("spec") or {})
            model = plan.model_name_from_spec(md.get("spec") or {})
        except plan.PlanError as err:
            facts = await _wait_for_a_fix(facts, md, str(err))
            continue
        if not settings.enabled:
            now = time.time()
            await _write_condition(
                facts,
                ok=True,
                reason=plan.REASON_DISABLED,
                message="warm-up disabled: ready as soon as the containers are",
                now=now,
            )
            WARMUPS.labels(facts.namespace, md_name, plan.REASON_DISABLED).inc()
            await _record_warmed(facts, attempts=attempts, now=now)
            return
        if plan.should_give_up(attempts=attempts, settings=settings):
            await _give_up(
                facts,
                md,
                reason=plan.REASON_GAVE_UP,
                message=f"warm-up failed {attempts} times",
            )
            return
        delay = plan.backoff_seconds(attempt=attempts)
        if delay:
            await asyncio.sleep(delay)
        facts = await _write_condition(
            facts,
            ok=False,
            reason=plan.REASON_IN_PROGRESS,
            message=f"warming up (attempt {attempts + 1} of {settings.max_attempts})",
        )
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(
            _WARMUPS,
            functools.partial(
                warmup_client.run_warmup,
                target=_target(facts, model),
                settings=settings,
                stop=stop,
            ),
        )
        WARMUPS.labels(facts.namespace, md_name, result.reason).inc()
        WARMUP_DURATION.labels(facts.namespace, md_name).observe(result.duration_seconds)
        if result.reason == plan.REASON_INVALID_REQUEST:
            # The spec's fault, not the pod's: replacing pods would not help.
            facts = await _wait_for_a_fix(facts, md, result.message)
            continue
        if result.ok:
            now = time.time()
            facts = await _write_condition(
                facts, ok=True, reason=result.reason, message=result.message, now=now
            )
            await _record_warmed(facts, attempts=attempts, now=now)
            log.info("%s/%s: %s", facts.namespace, facts.name, result.message)
            await _api(
                post_event,
                _pod_ref(facts),
                warning=False,
                reason=result.reason,
                message=result.message,
            )
            return
        attempts += 1
        log.warning(
            "%s/%s: warm-up attempt %d failed: %s: %s",
            facts.namespace,
            facts.name,
            attempts,
            result.reason,
            result.message,
        )
        facts = await _write_condition(
            facts,
            ok=False,
            reason=result.reason,
            message=f"attempt {attempts} of {settings.max_attempts}: {result.message}",
        )
        await _api(patch_annotations, facts, {plan.ANNOTATION_ATTEMPTS: str(attempts)})
        if plan.should_give_up(attempts=attempts, settings=settings):
            await _give_up(
                facts,
                md,
                reason=result.reason,
                message=f"warm-up failed {attempts} times, last: {result.reason}: {result.message}",
            )
            return


# After an unexpected error (API server hiccup, a bug) the warm-up starts over this much later.
RETRY_AFTER_ERROR_SECONDS = 10.0


async def _run(facts: plan.PodFacts, entry_stop: threading.Event) -> None:
    try:
        while True:
            try:
                await warm_up(facts, entry_stop)
                return
            except warmup_client.StoppedError:
                log.info("%s/%s: warm-up stopped", facts.namespace, facts.name)
                return
            except ApiException as err:
                if err.status in (404, 409, 422):
                    # The pod is gone or was replaced (uid precondition): nothing to warm.
                    log.info("%s/%s: pod gone (%s)", facts.namespace, facts.name, err.reason)
                    return
                log.warning(
                    "%s/%s: warm-up interrupted by an API error, retrying: %s",
                    facts.namespace,
                    facts.name,
                    err.reason,
                )
            except Exception:
                log.exception("%s/%s: warm-up crashed, retrying", facts.namespace, facts.name)
            await asyncio.sleep(RETRY_AFTER_ERROR_SECONDS)
    except asyncio.CancelledError:
        entry_stop.set()
        raise
    finally:
        current = REGISTRY.get(facts.uid)
        if current is not None and current.stop is entry_stop:
            del REGISTRY[facts.uid]
        IN_FLIGHT.set(len(REGISTRY))


def start(facts: plan.PodFacts) -> None:
    if facts.uid in REGISTRY:
        return
    stop = threading.Event()
    task = asyncio.get_running_loop().create_task(
        _run(facts, stop), name=f"warm-up {facts.namespace}/{facts.name}"
    )
    REGISTRY[facts.uid] = InFlight(task=task, stop=stop, namespace=facts.namespace, name=facts.name)
    IN_FLIGHT.set(len(REGISTRY))


def cancel(uid: str) -> None:
    entry = REGISTRY.pop(uid, None)
    if entry is not None:
        entry.stop.set()  # the thread stops after its requests in flight
        entry.task.cancel()
        log.info("%s/%s: warm-up cancelled (pod going away)", entry.namespace, entry.name)
    IN_FLIGHT.set(len(REGISTRY))


# --------------------------------------------------------------------------- handlers


async def _crash_path(facts: plan.PodFacts, crashes: plan.Crashes) -> None:
    """A model that fails to load makes Triton exit: the containers never get ready and the
    kubelet restarts them. Count each exit as a failed attempt; after maxAttempts, replace."""
    if facts.uid in _GIVING_UP:
        return
    md = await _api(fetch_modeldeployment, facts.namespace, facts.modeldeployment or "")
    if md is None:
        return
    try:
        settings = plan.settings_from_spec(md.get("spec") or {})
    except plan.PlanError:
        settings = plan.WarmupSettings()
    message = f"{crashes.message}; attempt {crashes.restarts} of {settings.max_attempts}"
    if plan.condition_differs(
        facts.warmed_condition, status=False, reason=plan.REASON_MODEL_NOT_READY, message=message
    ):
        await _write_condition(facts, ok=False, reason=plan.REASON_MODEL_NOT_READY, message=message)
    if plan.should_give_up(attempts=crashes.restarts, settings=settings):
        await _give_up(facts, md, reason=plan.REASON_MODEL_NOT_READY, message=crashes.message)


async def _maintain_annotations(facts: plan.PodFacts) -> None:
    sample = _WARMED.get(facts.uid, ("", "", None))[2]
    updates = plan.annotation_updates(facts, now=time.time(), load=sample.rate if sample else None)
    if not updates:
        return
    await _api(patch_annotations, facts, updates)
    ready = updates.get(plan.ANNOTATION_SECONDS_TO_READY)
    if ready is not None:
        SECONDS_TO_READY.labels(facts.namespace, facts.modeldeployment or "").observe(float(ready))


async def _close_gate(facts: plan.PodFacts) -> None:
    message = (
        f"container restarted after warm-up ({facts.restarts} restarts): the model is cold "
        "again and is warmed up anew before it gets traffic"
    )
    log.warning("%s/%s: %s", facts.namespace, facts.name, message)
    _WARMED.pop(facts.uid, None)
    await _write_condition(facts, ok=False, reason=plan.REASON_RESTARTED, message=message)
    # seconds-to-warm stays: it is the pod's start-up figure, not this re-warm's.
    await _api(patch_annotations, facts, {plan.ANNOTATION_WARMED_RESTARTS: None})


def _background(coro: Any, what: str) -> None:
    async def guarded() -> None:
        try:
            await coro
        except ApiException as err:
            if err.status not in (404, 409, 422):
                log.warning("%s: %s", what, err.reason)
        except Exception:
            log.exception("%s failed", what)

    task = asyncio.get_running_loop().create_task(guarded(), name=what)
    _BACKGROUND.add(task)
    task.add_done_callback(_BACKGROUND.discard)


_BACKGROUND: set[asyncio.Task[None]] = set()


@kopf.on.event("", "v1", "pods", labels={plan.MD_LABEL: kopf.PRESENT})
async def pod_event(event: Mapping[str, Any], body: kopf.Body, **_: Any) -> None:
    """Quick and non-blocking: decide, then hand the work to background tasks."""
    facts = plan.pod_facts(body)
    if event.get("type") == "DELETED" or facts.deleting:
        cancel(facts.uid)
        _WARMED.pop(facts.uid, None)
        _LAST_FACTS.pop(facts.uid, None)
        _GIVING_UP.discard(facts.uid)
        return
    _LAST_FACTS[facts.uid] = facts
    _background(_maintain_annotations(facts), f"annotations of {facts.namespace}/{facts.name}")
    if plan.cold_again(facts):
        # The model restarted cold behind an open gate: close it; the next event with the
        # containers ready warms the pod up again.
        _background(_close_gate(facts), f"closing the gate of {facts.namespace}/{facts.name}")
        return
    if facts.warmed:
        if facts.ip is not None and facts.uid not in _WARMED:
            _WARMED[facts.uid] = (facts.namespace, facts.name, None)
        return
    if plan.needs_warmup(facts):
        start(facts)
        return
    if not facts.containers_ready:
        cancel(facts.uid)  # containers lost readiness mid-warm-up: start over once ready
        crashes = plan.container_crashes(body)
        if crashes is not None and facts.modeldeployment is not None:
            _background(
                _crash_path(facts, crashes), f"crash path of {facts.namespace}/{facts.name}"
            )


async def _refresh_loads(stopped: asyncio.Event) -> None:
    """Sample each warmed pod's served-request counter; its rate orders scale-down."""
    while not stopped.is_set():
        for uid, (namespace, name, previous) in list(_WARMED.items()):
            facts = _LAST_FACTS.get(uid)
            if facts is None or facts.ip is None:
                continue
            target = warmup_client.Target(host=facts.ip, model="")
            count = await _api(warmup_client.fetch_request_count, target=target)
            now = time.time()
            if count is None:
                continue
            rate = (
                plan.request_rate(
                    previous_count=previous.count,
                    previous_time=previous.time,
                    count=count,
                    time=now,
                )
                if previous is not None
                else None
            )
            _WARMED[uid] = (
                namespace,
                name,
                LoadSample(host=facts.ip, count=count, time=now, rate=rate),
            )
            if rate is not None:
                updates = plan.annotation_updates(facts, now=now, load=rate)
                if updates:
                    _background(_api(patch_annotations, facts, updates), f"cost of {name}")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopped.wait(), timeout=LOAD_REFRESH_SECONDS)


_STOPPED = asyncio.Event()


@kopf.on.startup()
async def warmup_startup(**_: Any) -> None:
    _background(_refresh_loads(_STOPPED), "load refresh")


@kopf.on.cleanup()
async def warmup_cleanup(**_: Any) -> None:
    _STOPPED.set()
    for uid in list(REGISTRY):
        cancel(uid)
