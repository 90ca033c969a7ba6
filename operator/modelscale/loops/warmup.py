"""The warm-up runner: warms new pods up and opens their `modelscale.dev/warmed-up` gate.

Why pod events plus our own registry of in-flight warm-ups, and not `kopf.daemon`: kopf
puts a finalizer on every object a daemon or timer runs for. On pods that means a pod
cannot go away while the operator is down (scale-down and rollouts hang). Events need no
finalizer and give us what a daemon would:
- cancelled when the pod is deleted: a DELETED event or a deletionTimestamp stops it;
- resumed after an operator restart: kopf lists all pods at start, every pod whose gate is
  not True yet gets a fresh warm-up (the attempt counter lives in a pod annotation).

Only the leader warms (`modelscale.leader`): a follower ignores pod events; when it takes
the lease over it lists every pod once (`resume`) and carries on from what the pods say;
when it loses the lease it drops every warm-up in flight (`on_lost`), and the fenced API
client refuses any write that was still on its way. The gate is opened, and the restart
count that re-closes it after a container restart recorded, by one `pods/status` patch:
no kill can leave one without the other.

All runtime state (in-flight warm-ups, warmed pods whose load is sampled, thread pools)
lives in one `WarmupRunner`, created at operator start. Blocking work (tritonclient, the
Kubernetes client) runs in bounded thread pools, so many pods warming at once never block
the event loop. The clock is read in the runner's steps and passed down as `now`."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import threading
import time
from collections.abc import Callable, Coroutine, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from modelscale import podfacts, telemetry
from modelscale.api.v1alpha1 import ModelDeployment, WarmUp, from_rfc3339
from modelscale.control import breaker
from modelscale.kube import reads
from modelscale.kube.lease import NotLeaderError
from modelscale.leader import Leadership
from modelscale.loops import control_key, podcalls
from modelscale.podfacts import ANNOTATION_ATTEMPTS, ANNOTATION_SECONDS_TO_READY, PodFacts
from modelscale.warmup import client as warmup_client
from modelscale.warmup import gate, pod_annotations, reasons, verdict

log = logging.getLogger(__name__)

# Warm-ups running at once; more wait for a slot (each may use `concurrency` threads more).
MAX_CONCURRENT_WARMUPS = 16
# How often warmed pods' load is sampled for their deletion cost.
LOAD_REFRESH_SECONDS = 30.0
# Spec problems are re-checked this often: a fix to `warmUp` does not change the pod
# template, so no pod event would tell us about it.
SPEC_RECHECK_SECONDS = 30.0
# After an unexpected error (API server hiccup, a bug) the warm-up starts over this much later.
RETRY_AFTER_ERROR_SECONDS = 10.0
# How long the write that opens the gate after a finished warm-up retries a 429/5xx: a
# warm-up costs real inference time, throwing it away over one overloaded answer is waste.
OPEN_GATE_RETRY_SECONDS = 30.0


@dataclasses.dataclass
class InFlight:
    task: asyncio.Task[None]
    stop: threading.Event
    namespace: str
    name: str


@dataclasses.dataclass(frozen=True)
class LoadSample:
    count: float
    time: float
    rate: float | None = None


class WarmupRunner:
    """Warm-ups in flight and warmed pods, for one operator process. Call its methods on
    the event loop only."""

    def __init__(
        self,
        api: client.ApiClient,
        *,
        clock: Callable[[], float] = time.time,
        leader: Leadership | None = None,
    ) -> None:
        self._api = api
        self._clock = clock
        self._leader = leader if leader is not None else Leadership.standalone()
        self._warmups = ThreadPoolExecutor(
            max_workers=MAX_CONCURRENT_WARMUPS, thread_name_prefix="warmup"
        )
        self._k8s = podcalls.PodCalls(api)
        self.in_flight: dict[str, InFlight] = {}  # by pod uid
        self._warmed: dict[str, LoadSample | None] = {}  # warmed pods by uid: last load sample
        self._last_facts: dict[str, PodFacts] = {}
        self._giving_up: set[str] = set()
        self._background: set[asyncio.Task[None]] = set()
        self._stopped = asyncio.Event()

    def _spawn(self, coro: Coroutine[Any, Any, None], what: str) -> None:
        async def guarded() -> None:
            try:
                await coro
            except ApiException as err:
                if err.status not in (404, 409, 422):
                    log.warning("%s: %s", what, err.reason)
            except NotLeaderError as err:
                log.info("%s: %s", what, err)
            except Exception:
                log.exception("%s failed", what)

        task = asyncio.get_running_loop().create_task(guarded(), name=what)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # ----------------------------------------------------------------------- the warm-up

    async def _closed(self, facts: PodFacts, *, reason: str, message: str) -> PodFacts:
        """Write the gate closed (status False) with why, now."""
        return await self._k8s.write_condition(
            facts, ok=False, reason=reason, message=message, now=self._clock()
        )

    async def _give_up(
        self, facts: PodFacts, md: Mapping[str, Any] | None, *, reason: str, message: str
    ) -> None:
        """After maxAttempts: say so on the pod and the ModelDeployment, and delete the pod
        so the Deployment replaces it (a fresh pod may land on a healthy node)."""
        if facts.uid in self._giving_up:
            return
        self._giving_up.add(facts.uid)
        text = f"pod {facts.name}: {message}; deleting it so that it is replaced"
        log.warning("%s/%s: %s", facts.namespace, facts.name, text)
        now = self._clock()
        await self._k8s.event(
            podcalls.pod_ref(facts), warning=True, reason=reasons.GAVE_UP, message=text, now=now
        )
        if md is not None:
            await self._k8s.event(
                podcalls.md_ref(md), warning=True, reason=reasons.GAVE_UP, message=text, now=now
            )
        telemetry.PODS_REPLACED.labels(facts.namespace, facts.modeldeployment or "").inc()
        telemetry.WARMUPS.labels(facts.namespace, facts.modeldeployment or "", reason).inc()
        await self._k8s.delete(facts)

    async def _wait_for_a_fix(
        self,
        facts: PodFacts,
        md: Mapping[str, Any],
        message: str,
        *,
        reason: str = reasons.INVALID_REQUEST,
    ) -> PodFacts:
        """The warm-up cannot be planned from the spec: keep the gate closed, say why on the
        pod and (once) on the ModelDeployment, and look at the spec again later."""
        if gate.condition_differs(
            facts.warmed_condition, status=False, reason=reason, message=message
        ):
            now = self._clock()
            facts = await self._k8s.write_condition(
                facts, ok=False, reason=reason, message=message, now=now
            )
            await self._k8s.event(
                podcalls.md_ref(md),
                warning=True,
                reason=reason,
                message=f"pod {facts.name}: {message}",
                now=now,
            )
        await asyncio.sleep(SPEC_RECHECK_SECONDS)
        return facts

    async def _open(self, facts: PodFacts, *, reason: str, message: str, attempts: int) -> PodFacts:
        """Open the gate and record the warm-up (restart count, attempts, seconds-to-warm,
        deletion cost) in one patch, retrying a 429/5xx for a while."""
        # `now` is taken just before the gate opens: creation + seconds-to-warm never lies
        # after the moment traffic could first arrive.
        now = self._clock()
        updates = pod_annotations.annotation_updates(
            facts, now=now, load=None, warmed=True, attempts=attempts
        )
        facts = await self._k8s.write_condition(
            facts,
            ok=True,
            reason=reason,
            message=message,
            now=now,
            annotations=updates,
            retry_for=OPEN_GATE_RETRY_SECONDS,
        )
        warm = updates.get(podfacts.ANNOTATION_SECONDS_TO_WARM)
        if warm is not None:
            telemetry.SECONDS_TO_WARM.labels(facts.namespace, facts.modeldeployment or "").observe(
                float(warm)
            )
        if facts.ip is not None:
            self._warmed[facts.uid] = None
        return facts

    async def _half_open(self, facts: PodFacts, md: ModelDeployment) -> None:
        """A pod the circuit breaker ejected is warmed up again only after its
        `probeAfterSeconds` (half-open); the warm-up is the probe."""
        condition = facts.warmed_condition
        settings = md.spec.serving.circuit_breaker if md.spec.serving else None
        if condition is None or condition.reason != breaker.CIRCUIT_OPEN or settings is None:
            return
        since = (
            from_rfc3339(condition.last_transition_time) if condition.last_transition_time else None
        )
        delay = breaker.probe_delay(ejected_at=since, settings=settings, now=self._clock())
        if delay > 0:
            log.info("%s/%s: ejected; probing it in %.0f s", facts.namespace, facts.name, delay)
            await asyncio.sleep(delay)

    async def warm_up(self, facts: PodFacts, stop: threading.Event) -> None:
        """Warm one pod up, retrying with backoff; the gate opens only on success."""
        facts = await self._k8s.fresh(facts)  # the attempt counter may have moved meanwhile
        if not gate.needs_warmup(facts):
            return
        md_name = facts.modeldeployment or ""
        attempts = facts.attempts
        while True:
            found = await self._k8s.spec(facts)
            if found is None:
                log.info(
                    "%s/%s: ModelDeployment %s is gone; not warming",
                    facts.namespace,
                    facts.name,
                    md_name,
                )
                return
            body, md = found.body, found.md
            if md is None:
                facts = await self._wait_for_a_fix(facts, body, found.problem)
                continue
            settings = md.spec.warm_up
            await self._half_open(facts, md)
            if not settings.enabled:
                await self._open(
                    facts,
                    reason=reasons.DISABLED,
                    message="warm-up disabled: ready as soon as the containers are",
                    attempts=attempts,
                )
                telemetry.WARMUPS.labels(facts.namespace, md_name, reasons.DISABLED).inc()
                return
            if verdict.should_give_up(attempts=attempts, settings=settings):
                await self._give_up(
                    facts, body, reason=reasons.GAVE_UP, message=f"warm-up failed {attempts} times"
                )
                return
            delay = verdict.backoff_seconds(attempt=attempts)
            if delay:
                await asyncio.sleep(delay)
            waiting = facts.warmed_condition
            if waiting is None or waiting.reason != reasons.INVALID_REQUEST:
                # Re-checking a spec Triton rejected keeps that reason on the gate: flipping
                # to InProgress and back every SPEC_RECHECK_SECONDS flapped the
                # ModelDeployment's Degraded condition and repeated its event.
                facts = await self._closed(
                    facts,
                    reason=reasons.IN_PROGRESS,
                    message=f"warming up (attempt {attempts + 1} of {settings.max_attempts})",
                )
            assert facts.ip is not None  # needs_warmup
            # The key is needed only to load the model with spec.serving.
            key = await self._k8s.call(control_key.fetch, self._api, md) if md.spec.serving else ""
            result = await asyncio.get_running_loop().run_in_executor(
                self._warmups,
                functools.partial(
                    warmup_client.run_warmup,
                    target=warmup_client.Target(
                        host=facts.ip, model=md.spec.model.name, control_key=key or ""
                    ),
                    settings=settings,
                    stop=stop,
                    serving=md.spec.serving,
                    load_timeout_seconds=float(md.spec.server.startup_timeout_seconds),
                ),
            )
            telemetry.WARMUPS.labels(facts.namespace, md_name, result.reason).inc()
            telemetry.WARMUP_DURATION.labels(facts.namespace, md_name).observe(
                result.duration_seconds
            )
            if result.reason in (reasons.INVALID_REQUEST, reasons.INVALID_SERVING_POLICY):
                # The spec's fault, not the pod's: replacing pods would not help.
                facts = await self._wait_for_a_fix(
                    facts, body, result.message, reason=result.reason
                )
                continue
            if result.ok:
                facts = await self._open(
                    facts, reason=result.reason, message=result.message, attempts=attempts
                )
                log.info("%s/%s: %s", facts.namespace, facts.name, result.message)
                await self._k8s.event(
                    podcalls.pod_ref(facts),
                    warning=False,
                    reason=result.reason,
                    message=result.message,
                    now=self._clock(),
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
            # The failed attempt is counted in the same write that says why.
            facts = await self._k8s.write_condition(
                facts,
                ok=False,
                reason=result.reason,
                message=f"attempt {attempts} of {settings.max_attempts}: {result.message}",
                now=self._clock(),
                annotations={ANNOTATION_ATTEMPTS: str(attempts)},
            )
            if verdict.should_give_up(attempts=attempts, settings=settings):
                await self._give_up(
                    facts,
                    body,
                    reason=result.reason,
                    message=(
                        f"warm-up failed {attempts} times, last: {result.reason}: {result.message}"
                    ),
                )
                return

    async def _run(self, facts: PodFacts, entry_stop: threading.Event) -> None:
        try:
            while True:
                try:
                    await self.warm_up(facts, entry_stop)
                    return
                except warmup_client.StoppedError:
                    log.info("%s/%s: warm-up stopped", facts.namespace, facts.name)
                    return
                except NotLeaderError as err:
                    # Our lease lapsed: wait until it is ours again (if another replica
                    # takes it, `on_lost` cancels this task), then start from the pod.
                    log.info("%s/%s: warm-up paused: %s", facts.namespace, facts.name, err)
                    await self._leader.wait()
                    continue
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
            current = self.in_flight.get(facts.uid)
            if current is not None and current.stop is entry_stop:
                del self.in_flight[facts.uid]
            telemetry.IN_FLIGHT.set(len(self.in_flight))

    def start_warmup(self, facts: PodFacts) -> None:
        if facts.uid in self.in_flight:
            return
        stop = threading.Event()
        task = asyncio.get_running_loop().create_task(
            self._run(facts, stop), name=f"warm-up {facts.namespace}/{facts.name}"
        )
        self.in_flight[facts.uid] = InFlight(
            task=task, stop=stop, namespace=facts.namespace, name=facts.name
        )
        telemetry.IN_FLIGHT.set(len(self.in_flight))

    def cancel(self, uid: str) -> None:
        entry = self.in_flight.pop(uid, None)
        if entry is not None:
            entry.stop.set()  # the thread stops after its requests in flight
            entry.task.cancel()
            log.info("%s/%s: warm-up cancelled (pod going away)", entry.namespace, entry.name)
        telemetry.IN_FLIGHT.set(len(self.in_flight))

    # ----------------------------------------------------------------------- pod events

    async def _crash_path(self, facts: PodFacts, crashes: podfacts.Crashes) -> None:
        """A model that fails to load makes Triton exit: the containers never get ready and
        the kubelet restarts them. Count each exit as a failed attempt; after maxAttempts,
        replace."""
        if facts.uid in self._giving_up:
            return
        found = await self._k8s.spec(facts)
        if found is None:
            return
        body = found.body
        settings = found.md.spec.warm_up if found.md is not None else WarmUp()
        message = f"{crashes.message}; attempt {crashes.restarts} of {settings.max_attempts}"
        if gate.condition_differs(
            facts.warmed_condition, status=False, reason=reasons.MODEL_NOT_READY, message=message
        ):
            await self._closed(facts, reason=reasons.MODEL_NOT_READY, message=message)
        if verdict.should_give_up(attempts=crashes.restarts, settings=settings):
            await self._give_up(
                facts, body, reason=reasons.MODEL_NOT_READY, message=crashes.message
            )

    async def _maintain_annotations(self, facts: PodFacts, *, now: float) -> None:
        sample = self._warmed.get(facts.uid)
        updates = pod_annotations.annotation_updates(
            facts, now=now, load=sample.rate if sample else None
        )
        if not updates:
            return
        await self._k8s.annotate(facts, updates)
        ready = updates.get(ANNOTATION_SECONDS_TO_READY)
        if ready is not None:
            telemetry.SECONDS_TO_READY.labels(facts.namespace, facts.modeldeployment or "").observe(
                float(ready)
            )

    async def _close_gate(self, facts: PodFacts, *, now: float) -> None:
        message = (
            f"container restarted after warm-up ({facts.restarts} restarts): the model is cold "
            "again and is warmed up anew before it gets traffic"
        )
        log.warning("%s/%s: %s", facts.namespace, facts.name, message)
        self._warmed.pop(facts.uid, None)
        # One write: a kill in between cannot leave a closed gate still marked warmed.
        # seconds-to-warm stays: it is the pod's start-up figure, not this re-warm's.
        await self._k8s.write_condition(
            facts,
            ok=False,
            reason=reasons.RESTARTED,
            message=message,
            now=now,
            annotations={podfacts.ANNOTATION_WARMED_RESTARTS: None},
        )

    def on_pod_event(self, *, event_type: str | None, body: Mapping[str, Any]) -> None:
        """Quick and non-blocking: decide, then hand the work to background tasks."""
        facts = podfacts.read(body)
        where = f"{facts.namespace}/{facts.name}"
        if event_type == "DELETED" or facts.deleting:
            self.cancel(facts.uid)
            self._warmed.pop(facts.uid, None)
            self._last_facts.pop(facts.uid, None)
            self._giving_up.discard(facts.uid)
            return
        if not self._leader.holds():
            return  # the leader warms; `resume` catches up when this replica takes over
        now = self._clock()
        self._last_facts[facts.uid] = facts
        self._spawn(self._maintain_annotations(facts, now=now), f"annotations of {where}")
        if gate.cold_again(facts):
            # The model restarted cold behind an open gate: close it; the next event with the
            # containers ready warms the pod up again.
            self._spawn(self._close_gate(facts, now=now), f"closing the gate of {where}")
            return
        if facts.warmed:
            if facts.ip is not None and facts.uid not in self._warmed:
                self._warmed[facts.uid] = None
            return
        if gate.needs_warmup(facts):
            self.start_warmup(facts)
            return
        if not facts.containers_ready:
            self.cancel(facts.uid)  # containers lost readiness mid-warm-up: start over once ready
            if facts.crashes is not None and facts.modeldeployment is not None:
                self._spawn(self._crash_path(facts, facts.crashes), f"crash path of {where}")

    # ----------------------------------------------------------------------- load sampling

    async def _refresh_loads(self) -> None:
        """Sample each warmed pod's served-request counter; its rate orders scale-down."""
        while not self._stopped.is_set():
            for uid, previous in list(self._warmed.items()) if self._leader.holds() else []:
                facts = self._last_facts.get(uid)
                if facts is None or facts.ip is None:
                    continue
                target = warmup_client.Target(host=facts.ip, model="")
                count = await self._k8s.call(warmup_client.fetch_request_count, target=target)
                now = self._clock()
                if count is None:
                    continue
                rate = (
                    pod_annotations.request_rate(
                        previous_count=previous.count,
                        previous_time=previous.time,
                        count=count,
                        time=now,
                    )
                    if previous is not None
                    else None
                )
                self._warmed[uid] = LoadSample(count=count, time=now, rate=rate)
                if rate is not None:
                    updates = pod_annotations.annotation_updates(facts, now=now, load=rate)
                    if updates:
                        self._spawn(self._k8s.annotate(facts, updates), f"cost of {facts.name}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopped.wait(), timeout=LOAD_REFRESH_SECONDS)

    def start(self) -> None:
        """Begin sampling warmed pods' load (on the running event loop)."""
        self._spawn(self._refresh_loads(), "load refresh")

    # ----------------------------------------------------------------------- leadership

    async def resume(self, *, namespaces: tuple[str, ...]) -> None:
        """This replica just took the lease: look at every ModelDeployment pod once, as
        kopf's initial listing does at start (pod events before now were ignored)."""
        bodies = await self._k8s.call(
            reads.list_modeldeployment_pods, self._api, namespaces=namespaces
        )
        log.info("leading: looking at %d pods for warm-ups to do", len(bodies))
        for body in bodies:
            self.on_pod_event(event_type="ADDED", body=body)

    def on_lost(self) -> None:
        """Another replica may lead now: drop every warm-up in flight (their writes are
        refused by the fence anyway) and what we knew, so that a later takeover starts from
        the pods again."""
        for uid in list(self.in_flight):
            self.cancel(uid)
        self._warmed.clear()
        self._last_facts.clear()
        self._giving_up.clear()

    def stop(self) -> None:
        self._stopped.set()
        for uid in list(self.in_flight):
            self.cancel(uid)
