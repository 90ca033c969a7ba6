"""Prometheus signals for many ModelDeployments at once.

ModelDeployments are grouped by (Prometheus URL, backend preset, latency signal); each
group costs one query per signal, so a pass over 200 ModelDeployments of one kind issues
as many queries as a pass over one. Spec overrides cost one query each."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
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
) -> dict[Key, promql.Signals]:
    """Signals per ModelDeployment; a group whose Prometheus fails is simply absent (the
    policy then holds), unless `strict`, which raises PrometheusError."""
    groups: dict[GroupKey, list[ModelDeployment]] = defaultdict(list)
    for md in mds:
        groups[_group_key(md, default_url)].append(md)
    namespaces = list(settings.current.namespaces) or None
    out: dict[Key, promql.Signals] = {}
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
        out.update(result.signals)
    return out
