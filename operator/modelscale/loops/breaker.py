"""The circuit breaker's pass (`control.breaker` decides): per-pod signals from Prometheus
for every ModelDeployment with `spec.serving.circuitBreaker`, then the gate of each pod to
eject closed (condition `CircuitOpen` with why, events on the pod and the ModelDeployment),
or the pod deleted after too many ejections. Blocking: run it in a thread.

Per-pod queries, batched like the scaling loop's (one per signal per Prometheus URL and
rate window, whatever the number of ModelDeployments). A pod whose gate is closed is out of
every Service's ready endpoints (and so of every gateway that reads EndpointSlices) and
does not count as warmed capacity, so the autoscaler replaces its capacity.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError

from modelscale import podfacts
from modelscale.api.v1alpha1 import CircuitBreaker, ModelDeployment
from modelscale.config import OperatorConfig
from modelscale.control import breaker
from modelscale.kube import events, reads
from modelscale.kube import pods as kube_pods
from modelscale.kube.cache import Cache
from modelscale.metrics import prometheus, transport
from modelscale.warmup import gate

log = logging.getLogger(__name__)

ANNOTATION_EJECTIONS = "modelscale.dev/ejections"
TIMEOUT_SECONDS = 5.0

PodKey = tuple[str, str]  # (namespace, pod)


def _queries(window: int, failure_counter: str) -> dict[str, str]:
    def rate(selector: str) -> str:
        return f"sum by (namespace, pod) (rate({selector}[{window}s]))"

    return {
        "success": rate("nv_inference_request_success"),
        # The default excludes refusals by a queue policy: the policy working, not the pod
        # failing.
        "failure": rate(failure_counter),
        "duration_us": rate("nv_inference_request_duration_us"),
    }


def _fetch(
    url: str, window: int, failure_counter: str, *, session: transport.GuardedSession
) -> dict[str, dict[PodKey, float]]:
    """Through the operator's guarded session, like the scaling loop's queries: a URL from a
    spec is checked against the allow-list, redirects are not followed, credentials go only
    to the operator's own Prometheus."""
    prom = prometheus.connect(url=url, timeout=TIMEOUT_SECONDS, session=session)
    out: dict[str, dict[PodKey, float]] = {}
    for signal, expr in _queries(window, failure_counter).items():
        samples = prometheus.instant(prom, expr=expr, timeout=TIMEOUT_SECONDS)
        out[signal] = {
            (s.labels.get("namespace", ""), s.labels.get("pod", "")): s.value for s in samples
        }
    return out


def is_ejected(facts: podfacts.PodFacts) -> bool:
    condition = facts.warmed_condition
    return (
        condition is not None
        and condition.status == "False"
        and condition.reason == breaker.CIRCUIT_OPEN
    )


def _ejections(facts: podfacts.PodFacts) -> int:
    raw = facts.annotations.get(ANNOTATION_EJECTIONS, "0")
    return int(raw) if raw.isdigit() else 0


def _health(
    facts: podfacts.PodFacts, signals: Mapping[str, Mapping[PodKey, float]]
) -> breaker.PodHealth:
    key = (facts.namespace, facts.name)
    success = signals["success"].get(key)
    duration = signals["duration_us"].get(key)
    latency = duration / success / 1e6 if success and duration is not None else None
    return breaker.PodHealth(
        name=facts.name,
        warmed=facts.warmed,
        ejected=is_ejected(facts),
        ejections=_ejections(facts),
        success_rate=success,
        failure_rate=signals["failure"].get(key),
        mean_latency_seconds=latency,
    )


def _act(
    api: client.ApiClient,
    md_body: Mapping[str, Any],
    facts: podfacts.PodFacts,
    verdict: breaker.Verdict,
    *,
    now: float,
) -> None:
    text = f"pod {facts.name}: {verdict.message}"
    pod_ref = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": facts.name, "namespace": facts.namespace, "uid": facts.uid},
    }
    replace = verdict.action == "Replace"
    for obj in [dict(md_body)] if replace else [pod_ref, dict(md_body)]:
        events.post(
            api, involved=obj, type_="Warning", reason=verdict.reason, message=text, now=now
        )
    log.warning("%s/%s: %s: %s", facts.namespace, facts.name, verdict.action, verdict.message)
    if replace:
        kube_pods.delete(api, namespace=facts.namespace, name=facts.name, uid=facts.uid)
        return
    condition = gate.warmed_condition(
        status=False,
        reason=breaker.CIRCUIT_OPEN,
        message=f"{verdict.reason}: {verdict.message}; out of traffic until it warms up again",
        now=now,
        previous=facts.warmed_condition,
    )
    # The gate and the ejection count in one write: a kill between two writes could not
    # lose the count (it bounds ejections before the pod is replaced).
    kube_pods.patch_condition(
        api,
        namespace=facts.namespace,
        name=facts.name,
        uid=facts.uid,
        change=gate.GateChange(
            condition=condition,
            annotations={ANNOTATION_EJECTIONS: str(_ejections(facts) + 1)},
        ),
    )


def run_pass(
    api: client.ApiClient, *, config: OperatorConfig, now: float, cache: Cache | None = None
) -> list[breaker.Verdict]:
    """One pass over every ModelDeployment with a circuit breaker; returns what it did.
    With a `cache` it lists nothing (and waits until it is synced)."""
    watched: list[tuple[ModelDeployment, Mapping[str, Any], CircuitBreaker]] = []
    if cache is not None and not cache.ready():
        return []  # until the watches' first listing (as the scaling pass)
    cached_mds = cache.modeldeployments() if cache is not None else None
    if cached_mds is None:
        cached_mds = reads.list_modeldeployments(api, namespaces=config.namespaces)
    for raw_md in cached_mds:
        body: Mapping[str, Any] = raw_md
        try:
            md = ModelDeployment.model_validate(body)
        except ValidationError:
            continue  # reported by the reconciler
        settings = md.spec.serving.circuit_breaker if md.spec.serving else None
        if settings is not None:
            watched.append((md, body, settings))
    if not watched:
        return []
    by_md: dict[tuple[str, str], list[podfacts.PodFacts]] = defaultdict(list)
    cached_pods = cache.pods() if cache is not None else None
    every = (
        [f for pods in cached_pods.values() for f in pods]
        if cached_pods is not None
        else [
            podfacts.read(raw)
            for raw in reads.list_modeldeployment_pods(api, namespaces=config.namespaces)
        ]
    )
    for facts in every:
        if facts.modeldeployment and not facts.deleting:
            by_md[(facts.namespace, facts.modeldeployment)].append(facts)
    # One session per pass, as the scaling loop: rotated credential files are read again.
    with transport.session(config.prometheus_access) as session:
        return _judge(
            api, watched, by_md, default_url=config.prometheus_url, session=session, now=now
        )


def _judge(
    api: client.ApiClient,
    watched: list[tuple[ModelDeployment, Mapping[str, Any], CircuitBreaker]],
    by_md: Mapping[tuple[str, str], list[podfacts.PodFacts]],
    *,
    default_url: str,
    session: transport.GuardedSession,
    now: float,
) -> list[breaker.Verdict]:
    fetched: dict[tuple[str, int, str], dict[str, dict[PodKey, float]]] = {}
    done: list[breaker.Verdict] = []
    for md, body, settings in watched:
        url = md.spec.scaling.prometheus.url or default_url
        source = (url, settings.window_seconds, settings.failure_counter)
        try:
            if source not in fetched:
                fetched[source] = _fetch(*source, session=session)
        except prometheus.PrometheusError as err:
            # No signal is no verdict: never eject on missing data.
            log.warning("%s/%s: circuit breaker holds: %s", md.namespace, md.name, err)
            continue
        pods = by_md.get((md.namespace, md.name), [])
        healths = [_health(f, fetched[source]) for f in pods]
        by_name = {f.name: f for f in pods}
        for verdict in breaker.decide(healths, settings=settings):
            try:
                _act(api, body, by_name[verdict.pod], verdict, now=now)
                done.append(verdict)
            except ApiException as err:
                log.warning(
                    "%s/%s: could not act on %s: %s",
                    md.namespace,
                    verdict.pod,
                    verdict.action,
                    err.reason,
                )
    return done
