"""One scaling pass over all ModelDeployments.

Per pass the API cost is constant in the number of ModelDeployments: ModelDeployments,
their pods (as `PodFacts`) and their Deployments come from the watch caches
(`kube.cache`), so the only list is the nodes'; Prometheus gets one query per signal (per
Prometheus URL and backend preset). Per ModelDeployment it writes only when something
changed: the Deployment's replicas on a scale, and a status patch only when the status
would change (the policy's clock-driven learned state at most every
`STATE_WRITE_SECONDS`)."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError

from modelscale import podfacts, telemetry
from modelscale.api.v1alpha1 import ModelDeployment
from modelscale.autoscaling import recommender
from modelscale.autoscaling.types import Recommendation
from modelscale.config import OperatorConfig
from modelscale.control import scaling
from modelscale.control.decide import Decision, decide
from modelscale.kube import apply as kube_apply
from modelscale.kube import events, reads
from modelscale.kube import status as kube_status
from modelscale.kube.cache import Cache
from modelscale.metrics import batch, groups, transport
from modelscale.metrics.promql import Signals
from modelscale.podfacts import PodFacts
from modelscale.resources import deployment, names

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace, name)


@dataclass(frozen=True)
class Outcome:
    """What one pass decided for one ModelDeployment (for logs, tests and benchmarks)."""

    key: Key
    recommendation: Recommendation
    applied: bool
    current: int


def group_pods(pods: Sequence[PodFacts]) -> dict[Key, list[PodFacts]]:
    grouped: dict[Key, list[PodFacts]] = defaultdict(list)
    for pod in pods:
        if pod.modeldeployment:
            grouped[(pod.namespace, pod.modeldeployment)].append(pod)
    return grouped


def _announce(
    api: client.ApiClient,
    body: Mapping[str, Any],
    md: ModelDeployment,
    rec: Recommendation,
    *,
    current: int,
    applied: bool,
    now: float,
) -> None:
    previous = md.status.autoscaling.reason if md.status and md.status.autoscaling else None
    involved = dict(body)
    if applied:
        direction = "Up" if rec.replicas > current else "Down"
        events.post(
            api,
            involved=involved,
            type_="Normal",
            reason=f"Scaled{direction}",
            message=f"{current} → {rec.replicas} replicas: {rec.reason}: {rec.message}",
            now=now,
        )
        telemetry.SCALE_EVENTS.labels(md.namespace, md.name, direction.lower()).inc()
    metrics_bad = rec.reason in scaling.METRIC_REASONS
    if metrics_bad and previous not in scaling.METRIC_REASONS:
        events.post(
            api,
            involved=involved,
            type_="Warning",
            reason=scaling.METRICS_UNAVAILABLE,
            message=f"not scaling down while metrics are unavailable: {rec.message}",
            now=now,
        )
    elif not metrics_bad and previous in scaling.METRIC_REASONS:
        events.post(
            api,
            involved=involved,
            type_="Normal",
            reason="MetricsRecovered",
            message=f"metrics are back; {rec.message}",
            now=now,
        )
    # Partial data holds a scale-down: say so once when it starts and once when it ends,
    # not every pass (status says it every pass).
    partial = rec.reason == METRICS_PARTIAL
    if partial and previous != METRICS_PARTIAL:
        events.post(
            api,
            involved=involved,
            type_="Warning",
            reason=METRICS_PARTIAL,
            message=rec.message,
            now=now,
        )
    elif not partial and previous == METRICS_PARTIAL:
        events.post(
            api,
            involved=involved,
            type_="Normal",
            reason=METRICS_COMPLETE,
            message=f"metrics are complete again; {rec.message}",
            now=now,
        )


METRICS_PARTIAL = recommender.METRICS_PARTIAL
METRICS_COMPLETE = "MetricsComplete"


def _count(fetched: batch.Fetched | batch.History) -> None:
    telemetry.QUERIES.inc(fetched.queries)
    telemetry.QUERY_ERRORS.inc(fetched.errors)


# The pass's deadlines, in scaling intervals from its start: Prometheus answers within
# one (a group that has not answered by then holds, and says so); no ModelDeployment is
# acted on after two, so a pass never runs into the liveness probe's three.
METRICS_DEADLINE_INTERVALS = 1.0
PASS_DEADLINE_INTERVALS = 2.0


@dataclass(frozen=True)
class View:
    """What a pass reads from Kubernetes: from the watch caches when they are synced,
    else listed (a pass before kopf's first full listing, or tests without kopf)."""

    modeldeployments: Sequence[Mapping[str, Any]]
    pods: Mapping[Key, Sequence[PodFacts]]
    running: Mapping[Key, kube_apply.Running]


def read_view(api: client.ApiClient, *, namespaces: Sequence[str], cache: Cache | None) -> View:
    ready_nodes = reads.list_ready_nodes(api)
    cached = _cached_view(cache)
    if cached is None:
        return View(
            modeldeployments=reads.list_modeldeployments(api, namespaces=namespaces),
            pods=group_pods(
                [
                    podfacts.read(p, ready_nodes=ready_nodes)
                    for p in reads.list_modeldeployment_pods(api, namespaces=namespaces)
                ]
            ),
            running=reads.list_running(api, namespaces=namespaces),
        )
    if ready_nodes is None:
        return cached
    return View(
        modeldeployments=cached.modeldeployments,
        pods={key: with_nodes(pods, ready_nodes) for key, pods in cached.pods.items()},
        running=cached.running,
    )


def _cached_view(cache: Cache | None) -> View | None:
    if cache is None:
        return None
    mds, pods, running = cache.modeldeployments(), cache.pods(), cache.running()
    if mds is None or pods is None or running is None:
        return None
    return View(modeldeployments=mds, pods=pods, running=running)


def with_nodes(pods: Sequence[PodFacts], ready_nodes: frozenset[str]) -> list[PodFacts]:
    """The cached facts (read without node readiness) with `node_ready` as of now."""
    return [
        p if p.node is None or p.node in ready_nodes else dataclasses.replace(p, node_ready=False)
        for p in pods
    ]


def run_pass(
    api: client.ApiClient,
    *,
    config: OperatorConfig,
    now: float,
    started: float | None = None,
    cache: Cache | None = None,
) -> list[Outcome]:
    """One scaling pass over every ModelDeployment the operator watches. `started`
    (time.monotonic) anchors the pass's deadlines; None: no deadline. With a `cache`,
    nothing is listed but the nodes (and nothing is done until it is synced); without
    one (tests without kopf), everything is listed."""
    namespaces = config.namespaces
    interval = config.autoscale_interval
    metrics_deadline = None if started is None else started + METRICS_DEADLINE_INTERVALS * interval
    pass_deadline = None if started is None else started + PASS_DEADLINE_INTERVALS * interval
    if cache is not None and not cache.ready():
        # Until kopf has listed every watched kind once. Listing them here instead (3,000
        # pods at 1,000 ModelDeployments) held ~10 s of GIL and a heap peak that the
        # process kept as RSS long after: the first passes wait for the watches instead.
        log.info("scaling pass: waiting for the watches' first listing")
        return []
    view = read_view(api, namespaces=namespaces, cache=cache)
    mds: dict[Key, tuple[ModelDeployment, Mapping[str, Any]]] = {}
    for body in view.modeldeployments:
        try:
            md = ModelDeployment.model_validate(body)
        except ValidationError:
            continue  # reported by the reconcile pass as Degraded/InvalidSpec
        deleting = (body.get("metadata") or {}).get("deletionTimestamp")
        # External mode too: the operator does not act, but still recommends (status,
        # events, modelscale_autoscaler_recommended_replicas) for KEDA or an HPA to follow.
        if not deleting:
            mds[md.namespace, md.name] = (md, body)
    telemetry.MODELDEPLOYMENTS.set(len(mds))
    _forget_gone(set(mds))
    if not mds:
        return []
    pods_by_md = view.pods
    replicas_now = view.running
    members = [md for md, _ in mds.values()]
    url = config.prometheus_url
    # One session per pass: rotated credential files are read again.
    with transport.session(config.prometheus_access) as session:
        sigs = batch.fetch(
            groups.plan(members, pods_by_md=pods_by_md, default_url=url),
            namespaces=namespaces,
            now=now,
            deadline=metrics_deadline,
            session=session,
        )
        _count(sigs)
        fresh = [md for md in members if not scaling.previous_state(md).model]
        histories = batch.history(
            fresh,
            default_url=url,
            namespaces=namespaces,
            now=now,
            deadline=metrics_deadline,
            session=session,
        )
        _count(histories)
    for key in mds:
        telemetry.METRICS_PROBLEMS.labels(*key).set(len(sigs.signals.get(key, Signals()).problems))
        if key in sigs.late:
            telemetry.UNFINISHED.labels(*key, "metrics").inc()
    outcomes: list[Outcome] = []
    left = [key for key in mds if key in replicas_now]  # the rest: not reconciled yet
    for done, key in enumerate(left):
        if pass_deadline is not None and time.monotonic() > pass_deadline:
            _report_unfinished(left[done:], after=PASS_DEADLINE_INTERVALS * interval)
            break
        md, body = mds[key]
        try:
            decision = decide(
                md,
                signals=sigs.signals.get(key, Signals()),
                tpot_p99=sigs.tpot_p99.get(key),
                metrics_error=sigs.unreachable.get(key),
                pods=pods_by_md.get(key, []),
                current=replicas_now[key].replicas,
                now=now,
                history=histories.series.get(key, ()),
                pass_interval_seconds=interval,
            )
            outcome = _act(api, md, body, decision=decision, running=replicas_now[key], now=now)
        except Exception:  # one ModelDeployment must not stop the pass for the others
            log.exception("scaling %s/%s failed", *key)
            continue
        if outcome is not None:
            outcomes.append(outcome)
    return outcomes


# See `_act`: status fields that change with the clock alone, and how often they are
# written when nothing else changed (8 passes at the default 15 s; well inside the
# default 300 s scale-down stabilisation window they carry).
VOLATILE_STATUS: tuple[tuple[str, ...], ...] = (("autoscaling", "learnedState"),)
STATE_WRITE_SECONDS = 120.0
_STATE_WRITTEN: dict[Key, float] = {}


def _spread(key: Key) -> float:
    """A stable fraction in [0, 1) for `key` (not `hash()`: that changes per process)."""
    digest = hashlib.blake2b(f"{key[0]}/{key[1]}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big") / 2**32


# The ModelDeployments the last pass saw. The delete event removes a ModelDeployment's
# series (handlers.indexes), but a pass that read it just before may set them again:
# the next pass, which does not see it, removes them for good.
_LAST_SEEN: set[Key] = set()


def _forget_gone(seen: set[Key]) -> None:
    for namespace, name in _LAST_SEEN - seen:
        telemetry.forget(namespace=namespace, name=name)
        _STATE_WRITTEN.pop((namespace, name), None)
    _LAST_SEEN.clear()
    _LAST_SEEN.update(seen)


def _report_unfinished(keys: Sequence[Key], *, after: float) -> None:
    for key in keys:
        telemetry.UNFINISHED.labels(*key, "act").inc()
    log.warning(
        "scaling pass stopped at its %.0f s deadline; not acted on this pass: %s",
        after,
        ", ".join(f"{ns}/{name}" for ns, name in keys),
    )


def _act(
    api: client.ApiClient,
    md: ModelDeployment,
    body: Mapping[str, Any],
    *,
    decision: Decision,
    running: kube_apply.Running,
    now: float,
) -> Outcome | None:
    key = (md.namespace, md.name)
    current = running.replicas
    rec, obs = decision.recommendation, decision.observation
    applied = scaling.should_actuate(md, rec, current=current)
    if applied:
        # The list is a few Prometheus round trips old and a Deployment's version moves with
        # every pod status change: re-read, and act only if it still runs what we decided on.
        fresh = kube_apply.read_deployment(api, namespace=md.namespace, name=names.deployment(md))
        if fresh is None or fresh.replicas != current:
            log.info("%s/%s: Deployment changed during the pass; deciding again next pass", *key)
            return None
        try:
            kube_apply.apply(
                api,
                deployment.build(md, replicas=rec.replicas),
                precondition=fresh,
            )
        except ApiException as err:
            if err.status != 409:
                raise
            log.info("%s/%s: Deployment changed while scaling; deciding again next pass", *key)
            return None
    desired = rec.replicas if md.spec.scaling.mode == "Predictive" else None
    # The policy's learned state moves with every pass (its windows record the time) even
    # when nothing else does: written with any other change, or on its own at most every
    # STATE_WRITE_SECONDS. A restart then loses at most that much of the windows.
    # A ModelDeployment not written since this process started counts as written a
    # fraction of the period ago, spread by its name: after a restart the first writes of
    # 1,000 learned states are spread over the period, not all sent in one pass.
    written = _STATE_WRITTEN.setdefault(key, now - _spread(key) * STATE_WRITE_SECONDS)
    state_due = now - written >= STATE_WRITE_SECONDS
    wrote = kube_status.patch_status_guarded(
        api,
        body=body,
        volatile=() if state_due else VOLATILE_STATUS,
        writer="scaling",
        build=lambda conds: scaling.status(
            md,
            obs=obs,
            rec=rec,
            state=decision.state,
            desired=desired,
            now=now,
            existing_conditions=conds,
        ),
    )
    if wrote:
        _STATE_WRITTEN[key] = now
    _announce(api, body, md, rec, current=current, applied=applied, now=now)
    telemetry.DECISIONS.labels(rec.reason).inc()
    telemetry.DESIRED.labels(*key).set(rec.replicas)
    if rec.forecast_token_rate is not None:
        telemetry.FORECAST_TOKEN_RATE.labels(*key).set(rec.forecast_token_rate)
    if obs.token_rate is not None:
        telemetry.CURRENT_TOKEN_RATE.labels(*key).set(obs.token_rate)
    if rec.horizon_seconds is not None:
        telemetry.HORIZON.labels(*key).set(rec.horizon_seconds)
    log.info("%s/%s: %d → %d (%s) %s", *key, current, rec.replicas, rec.reason, rec.message)
    return Outcome(key=key, recommendation=rec, applied=applied, current=current)


def timed_pass(
    api: client.ApiClient, *, config: OperatorConfig, cache: Cache | None = None
) -> list[Outcome]:
    """A pass at the current time, with its wall and CPU time recorded."""
    wall, cpu = time.monotonic(), time.thread_time()
    try:
        return run_pass(api, config=config, now=time.time(), started=wall, cache=cache)
    finally:
        # A pass that failed (apiserver down) still completed: liveness is about hangs.
        telemetry.SCALING_LOOP.beat(now=time.monotonic())
        telemetry.LOOP_SECONDS.observe(time.monotonic() - wall)
        telemetry.LAST_PASS_SECONDS.set(time.monotonic() - wall)
        telemetry.LOOP_CPU_SECONDS.inc(time.thread_time() - cpu)
