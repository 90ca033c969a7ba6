"""Prometheus signals for many ModelDeployments at once: one batch of queries per group
(`metrics.groups`). A group whose Prometheus fails is absent from the result (its
ModelDeployments hold) and the others are unaffected. Counts of queries and failures come
back with the result, for the operator's own metrics."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
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
    late: set[Key] = field(default_factory=set)
    """Those of `unreachable` whose answer did not come by the deadline."""
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


# Groups are queried in parallel, so one slow or unreachable Prometheus URL costs the
# others nothing; this many at once at most.
MAX_PARALLEL_GROUPS = 8


def fetch(
    plan: Sequence[groups.Group],
    *,
    namespaces: Sequence[str],
    now: float,
    strict: bool = False,
    deadline: float | None = None,
    session: requests.Session | None = None,
) -> Fetched:
    """Signals per ModelDeployment of every group; a group whose Prometheus fails is
    simply absent (the policy then holds), unless `strict`, which raises PrometheusError.

    `deadline` (time.monotonic): no query outlives it; a group that had not finished by
    then is reported per ModelDeployment in `unreachable`, like one that failed."""
    scope = list(namespaces) or None
    out = Fetched()
    if not plan:
        return out
    workers = min(MAX_PARALLEL_GROUPS, len(plan))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="prometheus") as pool:
        results = list(
            pool.map(
                lambda g: _fetch_group(g, scope=scope, now=now, deadline=deadline, session=session),
                plan,
            )
        )
    for group, answer in zip(plan, results, strict=True):
        out.errors += answer.errors
        result, tpot = answer.result, answer.tpot
        if isinstance(result, prometheus.PrometheusError):
            url = group.key.url
            log.warning(
                "Prometheus %s: %s; %d ModelDeployment(s) hold", url, result, len(group.members)
            )
            if strict:
                raise result
            why = f"cannot query Prometheus at {url}: {result}"
            keys = {(md.namespace, md.name) for md in group.members}
            out.unreachable.update(dict.fromkeys(keys, why))
            if isinstance(result, prometheus.DeadlineError):
                out.late.update(keys)
            continue
        out.queries += result.queries + (tpot.queries if tpot else 0)
        out.signals.update(result.signals)
        if tpot is not None:
            out.tpot_p99.update(_p99s(tpot.signals))
    return out


@dataclass(frozen=True)
class _GroupAnswer:
    result: prometheus.FetchResult | prometheus.PrometheusError
    tpot: prometheus.FetchResult | None = None
    errors: int = 0


def _fetch_group(
    group: groups.Group,
    *,
    scope: list[str] | None,
    now: float,
    deadline: float | None,
    session: requests.Session | None,
) -> _GroupAnswer:
    """One group's signals (or the error), its TPOT P99s when a member watches them, and
    the errors met."""
    url, backend, signal = group.key
    try:
        result = prometheus.fetch_signals(
            url=url,
            queries=promql.presets(backend=backend, latency_signal=signal, namespaces=scope),
            pods=group.owners,
            timeout=group.timeout_seconds,
            time=now,
            overrides=group.overrides,
            deadline=deadline,
            session=session,
        )
    except prometheus.PrometheusError as err:
        return _GroupAnswer(result=err, errors=1)
    if not group.watch_tpot or backend != "vllm":
        return _GroupAnswer(result=result)
    if signal == "TimePerOutputToken":  # the primary latency already is TPOT
        return _GroupAnswer(result=result, tpot=dataclasses.replace(result, queries=0))
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
            deadline=deadline,
            session=session,
        )
    except prometheus.PrometheusError as err:
        log.warning("Prometheus %s: TPOT: %s", url, err)
        return _GroupAnswer(result=result, errors=1)
    return _GroupAnswer(result=result, tpot=tpot)


def history(
    mds: Sequence[ModelDeployment],
    *,
    default_url: str,
    namespaces: Sequence[str],
    now: float,
    deadline: float | None = None,
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
                deadline=deadline,
                session=session,
            )
        except prometheus.PrometheusError as err:
            out.errors += 1
            log.warning("Prometheus %s: history: %s", url, err)
            continue
        out.queries += 1
        out.series.update(series)
    return out
