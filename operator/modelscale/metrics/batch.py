"""Prometheus signals for many ModelDeployments at once: one batch of queries per group
(`metrics.groups`). A group whose Prometheus fails is absent from the result (its
ModelDeployments hold) and the others are unaffected. Counts of queries and failures come
back with the result, for the operator's own metrics."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

import requests

from modelscale.api.v1alpha1 import ModelDeployment
from modelscale.metrics import groups, prometheus, promql
from modelscale.resources import names

log = logging.getLogger(__name__)

HISTORY_STEP_SECONDS = 60.0

Key = groups.Key


@dataclass
class Fetched:
    """Signals per ModelDeployment, P99 time per output token for those that set a TPOT
    SLO, and what it cost."""

    signals: dict[Key, promql.Signals] = field(default_factory=dict)
    tpot_p99: dict[Key, float] = field(default_factory=dict)
    unreachable: dict[Key, str] = field(default_factory=dict)
    """Why Prometheus gave no answer for a ModelDeployment (its URL and the error), as
    opposed to an answer without samples."""
    queries: int = 0
    errors: int = 0


@dataclass
class History:
    """Token-rate series (time, tokens/s) per ModelDeployment, and what it cost."""

    series: dict[Key, list[tuple[float, float]]] = field(default_factory=dict)
    queries: int = 0
    errors: int = 0


def _p99s(signals: dict[Key, promql.Signals]) -> dict[Key, float]:
    return {k: v.p99_seconds for k, v in signals.items() if v.p99_seconds is not None}


def fetch(
    plan: Sequence[groups.Group],
    *,
    namespaces: Sequence[str],
    now: float,
    strict: bool = False,
    session: requests.Session | None = None,
) -> Fetched:
    """Signals per ModelDeployment of every group; a group whose Prometheus fails is
    simply absent (the policy then holds), unless `strict`, which raises PrometheusError."""
    scope = list(namespaces) or None
    out = Fetched()
    for group in plan:
        url, backend, signal = group.key
        try:
            result = prometheus.fetch_signals(
                url=url,
                queries=promql.presets(backend=backend, latency_signal=signal, namespaces=scope),
                pods=group.owners,
                timeout=group.timeout_seconds,
                time=now,
                overrides=group.overrides,
                session=session,
            )
        except prometheus.PrometheusError as err:
            out.errors += 1
            log.warning(
                "Prometheus %s: %s; %d ModelDeployment(s) hold", url, err, len(group.members)
            )
            if strict:
                raise
            why = f"cannot query Prometheus at {url}: {err}"
            out.unreachable.update({(md.namespace, md.name): why for md in group.members})
            continue
        out.queries += result.queries
        out.signals.update(result.signals)
        if not group.watch_tpot or backend != "vllm":
            continue
        if signal == "TimePerOutputToken":  # the primary latency already is TPOT
            out.tpot_p99.update(_p99s(result.signals))
            continue
        # One more batched query per group for the second SLO, whatever the group's size.
        tpot_query = promql.presets(
            backend=backend, latency_signal="TimePerOutputToken", namespaces=scope
        )[promql.LATENCY_P99]
        try:
            tpot = prometheus.fetch_signals(
                url=url,
                queries={promql.LATENCY_P99: tpot_query},
                pods=group.owners,
                timeout=group.timeout_seconds,
                time=now,
                session=session,
            )
        except prometheus.PrometheusError as err:
            out.errors += 1
            log.warning("Prometheus %s: TPOT: %s", url, err)
            continue
        out.queries += tpot.queries
        out.tpot_p99.update(_p99s(tpot.signals))
    return out


def history(
    mds: Sequence[ModelDeployment],
    *,
    default_url: str,
    namespaces: Sequence[str],
    now: float,
    session: requests.Session | None = None,
) -> History:
    """Token-rate history per ModelDeployment over its `forecast.lookbackSeconds`, to
    bootstrap the forecaster of a new ModelDeployment (or one whose status was lost).
    One range query per group; failures leave the group out (it learns online instead)."""
    scope = list(namespaces) or None
    out = History()
    for (url, backend, signal), members in groups.by_key(mds, default_url=default_url).items():
        query = promql.presets(backend=backend, latency_signal=signal, namespaces=scope)[
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
                session=session,
            )
        except prometheus.PrometheusError as err:
            out.errors += 1
            log.warning("Prometheus %s: history: %s", url, err)
            continue
        out.queries += 1
        out.series.update(series)
    return out
