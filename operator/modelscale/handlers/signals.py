"""Prometheus signals for many ModelDeployments at once.

ModelDeployments are grouped by (Prometheus URL, backend preset, latency signal); each
group costs one query per signal, so a pass over 200 ModelDeployments of one kind issues
as many queries as a pass over one. Spec overrides cost one query each."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from modelscale.api.v1alpha1 import ModelDeployment
from modelscale.control import pods as pod_facts
from modelscale.handlers import opmetrics, settings
from modelscale.metrics import prometheus, promql
from modelscale.resources import names

log = logging.getLogger(__name__)

HISTORY_STEP_SECONDS = 60.0

Key = tuple[str, str]
GroupKey = tuple[str, str, str]


def _overrides(md: ModelDeployment) -> dict[str, str]:
    q = md.spec.scaling.prometheus.queries
    given = {
        promql.TOKEN_RATE: q.token_rate,
        promql.PROMPT_TOKEN_RATE: q.prompt_token_rate,
        promql.REQUEST_RATE: q.request_rate,
        promql.LATENCY_P99: q.latency_p99,
        promql.QUEUE_DEPTH: q.queue_depth,
    }
    return {signal: expr for signal, expr in given.items() if expr}


@dataclass
class Fetched:
    """Signals per ModelDeployment, and P99 time per output token for those that set a
    TPOT SLO (a second latency objective)."""

    signals: dict[Key, promql.Signals] = field(default_factory=dict)
    tpot_p99: dict[Key, float] = field(default_factory=dict)


def _group_key(md: ModelDeployment, default_url: str) -> GroupKey:
    scaling = md.spec.scaling
    url = scaling.prometheus.url or default_url
    return (url, md.spec.model.backend, scaling.targets.latency_slo.signal)


def history(
    mds: Sequence[ModelDeployment], *, default_url: str, now: float
) -> dict[Key, list[tuple[float, float]]]:
    """Token-rate history per ModelDeployment over its `forecast.lookbackSeconds`, to
    bootstrap the forecaster of a new ModelDeployment (or one whose status was lost).
    One range query per group; failures leave the group out (it learns online instead)."""
    groups: dict[GroupKey, list[ModelDeployment]] = defaultdict(list)
    for md in mds:
        groups[_group_key(md, default_url)].append(md)
    namespaces = list(settings.current.namespaces) or None
    out: dict[Key, list[tuple[float, float]]] = {}
    for (url, backend, signal), members in groups.items():
        query = promql.presets(backend=backend, latency_signal=signal, namespaces=namespaces)[
            promql.TOKEN_RATE
        ]
        lookback = max(md.spec.scaling.forecast.lookback_seconds for md in members)
        owner_of = promql.owner_by_deployment(
            {(md.namespace, names.deployment(md)): (md.namespace, md.name) for md in members}
        )
        try:
            series = prometheus.fetch_history(
                url=url,
                query=query,
                owner_of=owner_of,
                start=now - lookback,
                end=now,
                step=HISTORY_STEP_SECONDS,
                timeout=max(md.spec.scaling.prometheus.timeout_seconds for md in members),
            )
        except prometheus.PrometheusError as err:
            opmetrics.QUERY_ERRORS.inc()
            log.warning("Prometheus %s: history: %s", url, err)
            continue
        opmetrics.QUERIES.inc()
        out.update(series)
    return out


def fetch(
    mds: Sequence[ModelDeployment],
    *,
    pods_by_md: Mapping[Key, Sequence[Mapping[str, Any]]],
    default_url: str,
    now: float,
    strict: bool = False,
) -> Fetched:
    """Signals per ModelDeployment; a group whose Prometheus fails is simply absent (the
    policy then holds), unless `strict`, which raises PrometheusError."""
    groups: dict[GroupKey, list[ModelDeployment]] = defaultdict(list)
    for md in mds:
        groups[_group_key(md, default_url)].append(md)
    namespaces = list(settings.current.namespaces) or None
    out = Fetched()
    for (url, backend, signal), members in groups.items():
        owners: dict[tuple[str, str], Key] = {}
        for md in members:
            key = (md.namespace, md.name)
            for pod in pods_by_md.get(key, ()):
                # Warm-up requests are cold by design: their latency is not the SLO's and
                # their tokens are not demand. Only warmed, Ready pods are measured.
                facts = pod_facts.facts(dict(pod))
                if facts.ready and facts.warmed and not facts.terminating:
                    owners[(md.namespace, facts.name)] = key
        overrides = {(md.namespace, md.name): o for md in members if (o := _overrides(md))}
        timeout = max(md.spec.scaling.prometheus.timeout_seconds for md in members)
        try:
            result = prometheus.fetch_signals(
                url=url,
                queries=promql.presets(
                    backend=backend, latency_signal=signal, namespaces=namespaces
                ),
                pods=owners,
                timeout=timeout,
                time=now,
                overrides=overrides,
            )
        except prometheus.PrometheusError as err:
            opmetrics.QUERY_ERRORS.inc()
            log.warning("Prometheus %s: %s; %d ModelDeployment(s) hold", url, err, len(members))
            if strict:
                raise
            continue
        opmetrics.QUERIES.inc(result.queries)
        out.signals.update(result.signals)
        watch_tpot = [
            md for md in members if md.spec.scaling.targets.time_per_output_token_p99_seconds
        ]
        if not watch_tpot or backend != "vllm":
            continue
        if signal == "TimePerOutputToken":  # the primary latency already is TPOT
            out.tpot_p99.update(
                {k: v.p99_seconds for k, v in result.signals.items() if v.p99_seconds is not None}
            )
            continue
        # One more batched query per group for the second SLO, whatever the group's size.
        tpot_query = promql.presets(
            backend=backend, latency_signal="TimePerOutputToken", namespaces=namespaces
        )[promql.LATENCY_P99]
        try:
            tpot = prometheus.fetch_signals(
                url=url,
                queries={promql.LATENCY_P99: tpot_query},
                pods=owners,
                timeout=timeout,
                time=now,
            )
        except prometheus.PrometheusError as err:
            opmetrics.QUERY_ERRORS.inc()
            log.warning("Prometheus %s: TPOT: %s", url, err)
            continue
        opmetrics.QUERIES.inc(tpot.queries)
        out.tpot_p99.update(
            {k: v.p99_seconds for k, v in tpot.signals.items() if v.p99_seconds is not None}
        )
    return out
