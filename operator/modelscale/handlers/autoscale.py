"""The scaling loop: every interval, one pass over all ModelDeployments.

Per pass the cost is constant in the number of ModelDeployments: one list of
ModelDeployments, one of their pods, one of their Deployments, and one Prometheus query
per signal (per Prometheus URL and backend preset). Per ModelDeployment it writes only
when something changed: the Deployment's replicas on a scale, and one status patch."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import kopf
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError

from modelscale.api.v1alpha1 import ModelDeployment
from modelscale.autoscaling import recommender
from modelscale.autoscaling.types import Recommendation
from modelscale.control import pods as pod_facts
from modelscale.control import scaling
from modelscale.handlers import opmetrics, reconcile, settings, signals
from modelscale.handlers.shared import api_client
from modelscale.kube import apply as kube_apply
from modelscale.kube import events
from modelscale.kube import status as kube_status
from modelscale.metrics.promql import Signals
from modelscale.resources import deployment, names
from modelscale.warmup import plan as warmup_plan

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace, name)


@dataclass(frozen=True)
class Outcome:
    """What one pass decided for one ModelDeployment (for logs, tests and `recommend`)."""

    key: Key
    recommendation: Recommendation
    applied: bool
    current: int


def _key(body: dict[str, Any]) -> Key:
    meta = body.get("metadata") or {}
    return (str(meta.get("namespace", "")), str(meta.get("name", "")))


def _group_pods(raw_pods: Sequence[dict[str, Any]]) -> dict[Key, list[dict[str, Any]]]:
    grouped: dict[Key, list[dict[str, Any]]] = defaultdict(list)
    for pod in raw_pods:
        meta = pod.get("metadata") or {}
        owner = (meta.get("labels") or {}).get(names.LABEL_MODELDEPLOYMENT)
        if owner:
            grouped[(str(meta.get("namespace")), str(owner))].append(pod)
    return grouped


def _deployments(api: client.ApiClient, namespaces: Sequence[str]) -> dict[Key, kube_apply.Running]:
    apps = client.AppsV1Api(api)
    selector = f"{names.LABEL_MANAGED_BY}={names.MANAGED_BY}"
    lists = (
        [apps.list_deployment_for_all_namespaces(label_selector=selector)]
        if not namespaces
        else [apps.list_namespaced_deployment(ns, label_selector=selector) for ns in namespaces]
    )
    out: dict[Key, kube_apply.Running] = {}
    for result in lists:
        for dep in result.items:
            meta = dep.metadata
            owner = (meta.labels or {}).get(names.LABEL_MODELDEPLOYMENT) if meta else None
            now_running = kube_apply.running(dep)
            if meta and owner and meta.namespace and now_running:
                out[(meta.namespace, owner)] = now_running
    return out


def _list_pods(api: client.ApiClient, namespaces: Sequence[str]) -> list[dict[str, Any]]:
    if not namespaces:
        return kube_status.list_pods(api, namespace=None, selector=names.LABEL_MODELDEPLOYMENT)
    out: list[dict[str, Any]] = []
    for ns in namespaces:
        out.extend(kube_status.list_pods(api, namespace=ns, selector=names.LABEL_MODELDEPLOYMENT))
    return out


def decide(
    md: ModelDeployment,
    *,
    sig: Signals,
    raw_pods: Sequence[dict[str, Any]],
    current: int,
    now: float,
    history: Sequence[tuple[float, float]] = (),
    tpot_p99: float | None = None,
) -> tuple[Recommendation, Any, Any]:
    """Run the policy for one ModelDeployment: (recommendation, new state, observation).
    `history` (token rate over time) seeds a forecaster that has learned nothing yet."""
    stats = warmup_plan.warmup_stats_for(md_namespace=md.namespace, md_name=md.name, pods=raw_pods)
    obs = scaling.observation(
        md,
        signals=sig,
        pods=[pod_facts.facts(p) for p in raw_pods],
        current_replicas=current,
        measured_horizon=stats.median_seconds_to_warm,
        now=now,
        tpot_p99=tpot_p99,
    )
    config = scaling.policy_config(md.spec)
    state = scaling.previous_state(md)
    if history:
        state = recommender.bootstrap(state, samples=history, config=config)
    rec, state = recommender.recommend(obs, config=config, state=state)
    return rec, state, obs


def _announce(
    api: client.ApiClient,
    body: dict[str, Any],
    md: ModelDeployment,
    rec: Recommendation,
    *,
    current: int,
    applied: bool,
    now: float,
) -> None:
    previous = md.status.autoscaling.reason if md.status and md.status.autoscaling else None
    if applied:
        direction = "Up" if rec.replicas > current else "Down"
        events.post(
            api,
            involved=body,
            type_="Normal",
            reason=f"Scaled{direction}",
            message=f"{current} → {rec.replicas} replicas: {rec.reason}: {rec.message}",
            now=now,
        )
        opmetrics.SCALE_EVENTS.labels(md.namespace, md.name, direction.lower()).inc()
    metrics_bad = rec.reason in scaling.METRIC_REASONS
    if metrics_bad and previous not in scaling.METRIC_REASONS:
        events.post(
            api,
            involved=body,
            type_="Warning",
            reason=scaling.METRICS_UNAVAILABLE,
            message=f"not scaling down while metrics are unavailable: {rec.message}",
            now=now,
        )
    elif not metrics_bad and previous in scaling.METRIC_REASONS:
        events.post(
            api,
            involved=body,
            type_="Normal",
            reason="MetricsRecovered",
            message=f"metrics are back; {rec.message}",
            now=now,
        )


def run_pass(api: client.ApiClient, *, now: float) -> list[Outcome]:
    """One scaling pass over every ModelDeployment the operator watches."""
    namespaces = settings.current.namespaces
    bodies = kube_status.list_modeldeployments(api, namespaces=list(namespaces) or None)
    mds: dict[Key, tuple[ModelDeployment, dict[str, Any]]] = {}
    for body in bodies:
        try:
            md = ModelDeployment.model_validate(body)
        except ValidationError:
            continue  # reported by the reconcile pass as Degraded/InvalidSpec
        deleting = (body.get("metadata") or {}).get("deletionTimestamp")
        if md.spec.scaling.mode != "External" and not deleting:
            mds[md.namespace, md.name] = (md, body)
    opmetrics.MODELDEPLOYMENTS.set(len(mds))
    if not mds:
        return []
    pods_by_md = _group_pods(_list_pods(api, namespaces))
    replicas_now = _deployments(api, namespaces)
    sigs = signals.fetch(
        [md for md, _ in mds.values()],
        pods_by_md=pods_by_md,
        default_url=settings.current.prometheus_url,
        now=now,
    )
    fresh = [md for md, _ in mds.values() if not scaling.previous_state(md).model]
    histories = (
        signals.history(fresh, default_url=settings.current.prometheus_url, now=now)
        if fresh
        else {}
    )
    outcomes: list[Outcome] = []
    for key, (md, body) in mds.items():
        if key not in replicas_now:
            continue  # not reconciled yet: nothing to scale
        try:
            outcome = _scale_one(
                api,
                md,
                body,
                running=replicas_now[key],
                sigs=sigs,
                raw_pods=pods_by_md.get(key, []),
                history=histories.get(key, ()),
                now=now,
            )
        except Exception:  # one ModelDeployment must not stop the pass for the others
            log.exception("scaling %s/%s failed", *key)
            continue
        if outcome is not None:
            outcomes.append(outcome)
    return outcomes


def _scale_one(
    api: client.ApiClient,
    md: ModelDeployment,
    body: dict[str, Any],
    *,
    running: kube_apply.Running,
    sigs: signals.Fetched,
    raw_pods: Sequence[dict[str, Any]],
    history: Sequence[tuple[float, float]],
    now: float,
) -> Outcome | None:
    key = (md.namespace, md.name)
    current = running.replicas
    rec, state, obs = decide(
        md,
        sig=sigs.signals.get(key, Signals()),
        tpot_p99=sigs.tpot_p99.get(key),
        raw_pods=raw_pods,
        current=current,
        now=now,
        history=history,
    )
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
                precondition=fresh.resource_version,
            )
        except ApiException as err:
            if err.status != 409:
                raise
            log.info("%s/%s: Deployment changed while scaling; deciding again next pass", *key)
            return None
    desired = rec.replicas if md.spec.scaling.mode == "Predictive" else None
    kube_status.patch_status_guarded(
        api,
        body=body,
        build=lambda conds: scaling.status_patch(
            md, obs=obs, rec=rec, state=state, desired=desired, now=now, existing_conditions=conds
        ),
    )
    _announce(api, body, md, rec, current=current, applied=applied, now=now)
    opmetrics.DECISIONS.labels(rec.reason).inc()
    opmetrics.DESIRED.labels(*key).set(rec.replicas)
    if rec.forecast_token_rate is not None:
        opmetrics.FORECAST_TOKEN_RATE.labels(*key).set(rec.forecast_token_rate)
    if obs.token_rate is not None:
        opmetrics.CURRENT_TOKEN_RATE.labels(*key).set(obs.token_rate)
    if rec.horizon_seconds is not None:
        opmetrics.HORIZON.labels(*key).set(rec.horizon_seconds)
    log.info("%s/%s: %d → %d (%s) %s", *key, current, rec.replicas, rec.reason, rec.message)
    return Outcome(key=key, recommendation=rec, applied=applied, current=current)


def _timed_pass() -> None:
    wall, cpu = time.monotonic(), time.thread_time()
    try:
        run_pass(api_client(), now=time.time())
    finally:
        opmetrics.LOOP_SECONDS.observe(time.monotonic() - wall)
        opmetrics.LOOP_CPU_SECONDS.inc(time.thread_time() - cpu)


async def _every(
    interval: float, what: str, work: Callable[[], None], *, initial_delay: float = 0.0
) -> None:
    await asyncio.sleep(initial_delay)
    while True:
        started = time.monotonic()
        try:
            # The Kubernetes and Prometheus clients block: keep them off the event loop.
            await asyncio.to_thread(work)
        except Exception:
            log.exception("%s failed; next in %.0f s", what, interval)
        await asyncio.sleep(max(0.0, interval - (time.monotonic() - started)))


@kopf.on.startup()
async def autoscaler_start(memo: kopf.Memo, **_: Any) -> None:
    current = settings.current
    memo["loops"] = [
        asyncio.create_task(
            _every(current.autoscale_interval, "scaling pass", _timed_pass),
            name="modelscale-autoscaler",
        ),
        asyncio.create_task(
            # kopf's resume handlers reconcile everything at start; resync after that.
            _every(
                current.resync_interval,
                "resync",
                reconcile.resync_all,
                initial_delay=current.resync_interval,
            ),
            name="modelscale-resync",
        ),
    ]


@kopf.on.cleanup()
async def autoscaler_stop(memo: kopf.Memo, **_: Any) -> None:
    for task in memo.get("loops", []):
        task.cancel()
