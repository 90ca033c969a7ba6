"""The Prometheus adapter: run the batched queries, hand the vectors to pure code.

    result = fetch_signals(url=..., queries=promql.presets(backend="vllm"),
                           pods={(namespace, pod): (namespace, md_name), ...},
                           timeout=5.0, time=None, overrides={...})
    result.signals[(namespace, md_name)] -> promql.Signals
    result.queries -> queries issued (the same for 1 or 200 ModelDeployments, plus one per
                      spec override)

`time` evaluates every query at one instant (deterministic tests; the operator passes
its loop's `now`). Failures (unreachable, timeout, HTTP error, bad JSON) raise
`PrometheusError`; the handler turns it into a kopf.TemporaryError and the policy holds.

Blocking I/O (requests under prometheus-api-client): call from a thread, never from
`async def`.
"""

from __future__ import annotations

import datetime as dt
import math
import time as _time
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import requests
from prometheus_api_client import PrometheusConnect
from prometheus_api_client.exceptions import PrometheusApiClientException
from urllib3.util.retry import Retry

from modelscale.metrics import deadline, promql

Key = promql.Key
_T = TypeVar("_T")


class PrometheusError(Exception):
    """Prometheus unreachable, too slow, or it rejected a query."""


class DeadlineError(PrometheusError):
    """No complete answer by the request's or the pass's deadline."""


@dataclass(frozen=True)
class FetchResult:
    signals: dict[Key, promql.Signals]
    queries: int


# The whole request (connect, headers, body) ends this long after the query's own
# timeout, so Prometheus's "query timed out" arrives first when Prometheus is merely slow.
DEADLINE_GRACE_SECONDS = 0.25


def connect(
    *, url: str, timeout: float, session: requests.Session | None = None
) -> PrometheusConnect:
    """A client whose every request ends within `timeout` + DEADLINE_GRACE_SECONDS.

    `session` carries auth, TLS and proxies when Prometheus needs them (metrics.connection
    builds it); the deadline adapter is mounted on it for `url`."""
    # No client-side retries: the loop runs again in 15 s, and a retrying client would
    # stretch one cycle past the next when Prometheus is down.
    session = session or requests.Session()
    prom = PrometheusConnect(
        url=url, timeout=timeout + DEADLINE_GRACE_SECONDS, retry=Retry(total=0), session=session
    )
    # After PrometheusConnect's own mount, which it makes for the same prefix.
    session.mount(url, deadline.Adapter(max_retries=Retry(total=0)))
    return prom


def _bounded(prom: PrometheusConnect, *, timeout: float, call: Callable[[], _T], what: str) -> _T:
    """`call()` (one request through `prom`) cut off at the whole-request deadline."""
    limit = timeout + DEADLINE_GRACE_SECONDS
    with deadline.within(seconds=limit) as watch:
        try:
            return call()
        except (requests.RequestException, PrometheusApiClientException) as err:
            if watch.expired:
                raise DeadlineError(
                    f"{prom.url}: no complete answer within {limit:g} s: {what}"
                ) from err
            raise PrometheusError(f"{prom.url}: query failed: {_short(err)}: {what}") from err


def _instant(
    prom: PrometheusConnect, *, expr: str, time: float | None, timeout: float
) -> list[promql.Sample]:
    params: dict[str, Any] = {"timeout": f"{timeout:g}"}  # seconds; "2.5s" would be refused
    if time is not None:
        params["time"] = f"{time:.3f}"
    result = _bounded(
        prom, timeout=timeout, call=lambda: prom.custom_query(expr, params=params), what=expr
    )
    try:
        return promql.parse_vector(result)
    except (KeyError, TypeError, ValueError) as err:
        raise PrometheusError(f"{prom.url}: unexpected answer to {expr}: {err}") from err


def instant(prom: PrometheusConnect, *, expr: str, timeout: float) -> list[promql.Sample]:
    """One instant query now (the circuit breaker's per-pod signals); raises
    `PrometheusError`."""
    return _instant(prom, expr=expr, time=None, timeout=timeout)


def _short(err: Exception) -> str:
    text = str(err)
    return text if len(text) <= 300 else text[:300] + "..."


def _within(timeout: float, deadline: float | None, *, what: str) -> float:
    """The query timeout that still fits before `deadline` (time.monotonic)."""
    if deadline is None:
        return timeout
    left = deadline - _time.monotonic() - DEADLINE_GRACE_SECONDS
    if left <= 0.05:
        raise DeadlineError(f"the scaling pass's deadline came before {what}")
    return min(timeout, left)


def fetch_signals(
    *,
    url: str,
    queries: Mapping[str, promql.Query],
    pods: Mapping[tuple[str, str], Key],
    timeout: float,
    time: float | None = None,
    overrides: Mapping[Key, Mapping[str, str]] | None = None,
    prom: PrometheusConnect | None = None,
    deadline: float | None = None,
    session: requests.Session | None = None,
) -> FetchResult:
    """Signals for every ModelDeployment in `pods` (and in `overrides`).

    Map only pods that serve users (Ready, warmed up): a pod still warming serves only
    warm-up requests, whose cold latencies would read as an SLO breach and whose tokens
    as demand.

    Batched queries: one each, whatever the number of ModelDeployments. Overrides
    (signal -> PromQL, per ModelDeployment) cost one query each. The sample time of an
    overridden token rate is the evaluation time when the override returned data
    (Prometheus itself drops series older than its 5-minute lookback).

    `deadline` (time.monotonic) bounds the whole call: no query outlives it. A failing
    override or an impossible series affects its ModelDeployment alone
    (`Signals.problems`); a failing batched query raises PrometheusError."""
    prom = prom or connect(url=url, timeout=timeout, session=session)
    overrides = overrides or {}
    issued = 0
    values: dict[str, dict[Key, float]] = {}
    problems: dict[Key, list[str]] = defaultdict(list)
    counts: dict[Key, int] = {}
    eval_time: float | None = time
    for signal, query in queries.items():
        budget = _within(timeout, deadline, what=f"the {signal} query")
        samples = _instant(prom, expr=query.expr, time=time, timeout=budget)
        issued += 1
        checked = promql.aggregate_checked(query, samples, owners=pods)
        values[signal] = checked.values
        for key, problem in checked.problems.items():
            problems[key].append(problem)
        if signal == promql.SAMPLE_TIME:
            counts = promql.reporting_pods(samples, owners=pods)
        if samples and eval_time is None:
            eval_time = samples[0].timestamp

    overridden: dict[Key, dict[str, float | None]] = defaultdict(dict)
    for key, per_signal in overrides.items():
        for signal, expr in per_signal.items():
            if not expr:
                continue
            query = promql.override(signal, expr)
            # Missing, not the preset's value, when the user's own query fails.
            overridden[key][signal] = None
            try:
                budget = _within(timeout, deadline, what=f"the {signal} override")
                samples = _instant(prom, expr=expr, time=time, timeout=budget)
                issued += 1
                overridden[key][signal] = promql.aggregate_override(query, samples, key=key)
            except (PrometheusError, ValueError) as err:
                problems[key].append(f"override of {signal}: {err}")
                continue
            if samples and eval_time is None:
                eval_time = samples[0].timestamp

    keys = set(pods.values()) | set(overrides)
    signals = {
        key: _signals_for(
            key,
            values=values,
            overridden=overridden.get(key, {}),
            pods_reporting=counts.get(key, 0),
            eval_time=eval_time,
            problems=tuple(problems.get(key, ())),
        )
        for key in keys
    }
    return FetchResult(signals=signals, queries=issued)


def _signals_for(
    key: Key,
    *,
    values: Mapping[str, Mapping[Key, float]],
    overridden: Mapping[str, float | None],
    pods_reporting: int,
    eval_time: float | None,
    problems: tuple[str, ...],
) -> promql.Signals:
    sources: dict[str, str] = {}

    def pick(signal: str) -> float | None:
        if signal in overridden:
            sources[signal] = "override"
            return overridden[signal]
        value = values.get(signal, {}).get(key)
        if value is not None:
            sources[signal] = "preset"
        return value

    p99 = pick(promql.LATENCY_P99)
    if p99 is None and promql.LATENCY_P99 not in overridden:
        p99 = values.get(promql.LATENCY_P99_MEAN, {}).get(key)
        if p99 is not None:
            sources[promql.LATENCY_P99] = "mean-fallback"
    token_rate = pick(promql.TOKEN_RATE)
    sample_time = values.get(promql.SAMPLE_TIME, {}).get(key)
    if promql.TOKEN_RATE in overridden:
        sample_time = eval_time if token_rate is not None else None
    return promql.Signals(
        token_rate=token_rate,
        prompt_token_rate=pick(promql.PROMPT_TOKEN_RATE),
        request_rate=pick(promql.REQUEST_RATE),
        p99_seconds=p99,
        queue_depth=pick(promql.QUEUE_DEPTH),
        sample_time=sample_time,
        pods_reporting=pods_reporting,
        sources=sources,
        problems=problems,
    )


def fetch_history(
    *,
    url: str,
    query: promql.Query,
    owner_of: Callable[[str, str], Key | None],
    start: float,
    end: float,
    step: float,
    timeout: float,
    prom: PrometheusConnect | None = None,
    deadline: float | None = None,
    session: requests.Session | None = None,
) -> dict[Key, list[tuple[float, float]]]:
    """A batched SUM query (e.g. the token-rate preset) over [start, end], summed per
    ModelDeployment per step: history to bootstrap the forecaster after a restart or for
    a new ModelDeployment (`recommender.bootstrap`). Past pods no longer exist, so the
    owner is found by name (`promql.owner_by_deployment`)."""
    if query.kind != promql.Kind.SUM:
        raise ValueError("history needs a SUM query (token or request rate)")
    timeout = _within(timeout, deadline, what="the history query")
    prom = prom or connect(url=url, timeout=timeout, session=session)
    result = _bounded(
        prom,
        timeout=timeout,
        call=lambda: prom.custom_query_range(
            query.expr,
            start_time=dt.datetime.fromtimestamp(start, tz=dt.UTC),
            end_time=dt.datetime.fromtimestamp(end, tz=dt.UTC),
            step=f"{step:g}",
            params={"timeout": f"{timeout:g}"},
        ),
        what=f"range query {query.expr}",
    )
    sums: dict[Key, dict[float, float]] = defaultdict(lambda: defaultdict(float))
    try:
        for series in result:
            labels = series.get("metric") or {}
            key = owner_of(labels.get("namespace", ""), labels.get("pod", ""))
            if key is None:
                continue
            for ts, raw in series["values"]:
                value = float(raw)
                if not math.isnan(value):
                    sums[key][float(ts)] += value * query.scale
    except (KeyError, TypeError, ValueError) as err:
        raise PrometheusError(f"{prom.url}: unexpected range answer: {err}") from err
    return {key: sorted(points.items()) for key, points in sums.items()}
