"""PromQL presets per Triton backend, and the pure per-ModelDeployment aggregation.

One query per signal for ALL ModelDeployments: every preset groups `by (namespace, pod)`
(histograms also by `le`), the labels every standard Kubernetes scrape configuration adds.
The operator knows which pods belong to which ModelDeployment, so `aggregate` maps the
per-pod series to ModelDeployments here, in pure code — users need no relabelling, and
the number of queries per cycle does not grow with the number of ModelDeployments.

Per-ModelDeployment aggregation by query kind:
- SUM: rates and gauges are summed over the ModelDeployment's pods.
- HISTOGRAM: bucket rates are summed per (ModelDeployment, le), then the quantile is
  computed here with Prometheus's `histogram_quantile` semantics (`bucket_quantile`).
- MAX: a summary's quantile cannot be summed or averaged across pods; the slowest pod's
  P99 is used (conservative).
- RATIO: series labelled part="num" / part="den" are summed per ModelDeployment and
  divided (Triton core's mean latency = rate(duration) / rate(success)).
- OLDEST: per-pod timestamps of the newest sample; the ModelDeployment's sample time is
  the *oldest* of them, so one pod whose metrics stopped makes the whole reading stale.
- OVERRIDE: a user's PromQL from the spec, evaluated for one ModelDeployment (so each
  override costs one query per ModelDeployment per cycle). Series whose `namespace` /
  `modeldeployment` labels name another ModelDeployment are ignored; the rest are summed.

Presets (rate window `rate_window`, default 1m), per signal: vllm / tensorrtllm / Triton
core (python, onnxruntime, other):
- token_rate: vllm:generation_tokens_total / nv_llm_output_token_len_sum /
  nv_inference_count (inferences/s: for non-LLM models the spec's per-replica "tokens/s"
  is inferences/s) plus the requests Triton refused as REJECTED
  (`nv_inference_request_failure{reason="REJECTED"}`, what a spec.serving queue policy
  sheds): shed work is demand, or the scaling signal would hide the need to scale
- prompt_token_rate: vllm:prompt_tokens_total / nv_llm_input_token_len_sum / none
- request_rate: vllm:e2e_request_latency_seconds_count / nv_inference_request_success
- latency_p99: vllm:{time_to_first_token,time_per_output_token,e2e_request_latency}_
  seconds_bucket (histogram) / nv_inference_request_summary_us{quantile="0.99"} (summary)
- latency_p99_mean (fallback, Triton core only): rate(nv_inference_request_duration_us) /
  rate(nv_inference_request_success)
- queue_depth: vllm:num_requests_waiting / nv_trt_llm_request_metrics{request_type=
  "waiting"} / nv_inference_pending_request_count
- sample_time: timestamp() of the token counter (vllm) or nv_inference_request_success

Triton core has no latency histogram (2.51): its P99 needs `--metrics-config
summary_latencies=true`; without it the mean latency is the (optimistic) fallback. Core
latency is end-to-end whatever signal the spec chose.
"""

from __future__ import annotations

import enum
import math
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Key = tuple[str, str]  # (namespace, ModelDeployment name)

TOKEN_RATE = "token_rate"
PROMPT_TOKEN_RATE = "prompt_token_rate"
REQUEST_RATE = "request_rate"
LATENCY_P99 = "latency_p99"
LATENCY_P99_MEAN = "latency_p99_mean"  # fallback where the P99 query has no data
QUEUE_DEPTH = "queue_depth"
SAMPLE_TIME = "sample_time"

# Names of the spec's override fields (PromQueries), in signal order.
OVERRIDABLE = (TOKEN_RATE, PROMPT_TOKEN_RATE, REQUEST_RATE, LATENCY_P99, QUEUE_DEPTH)

VLLM_LATENCY_HISTOGRAMS = {
    "TimeToFirstToken": "vllm:time_to_first_token_seconds_bucket",
    "TimePerOutputToken": "vllm:time_per_output_token_seconds_bucket",
    "EndToEnd": "vllm:e2e_request_latency_seconds_bucket",
}
TRITON_CORE_BACKENDS = ("python", "onnxruntime", "other")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class Kind(enum.Enum):
    SUM = "sum"
    HISTOGRAM = "histogram"
    MAX = "max"
    RATIO = "ratio"
    OLDEST = "oldest"
    OVERRIDE = "override"


@dataclass(frozen=True)
class Query:
    signal: str
    expr: str
    kind: Kind
    scale: float = 1.0  # multiply the aggregated value (e.g. 1e-6 for microseconds)
    quantile: float = 0.99  # HISTOGRAM only


@dataclass(frozen=True)
class Sample:
    """One series of an instant-query result."""

    labels: Mapping[str, str]
    value: float
    timestamp: float


@dataclass(frozen=True)
class Signals:
    """What Prometheus said about one ModelDeployment (None: no data)."""

    token_rate: float | None = None
    prompt_token_rate: float | None = None
    request_rate: float | None = None
    p99_seconds: float | None = None
    queue_depth: float | None = None
    sample_time: float | None = None  # oldest newest-sample among its reporting pods
    pods_reporting: int = 0  # pods with a fresh-enough series for the sample-time metric
    sources: Mapping[str, str] = field(default_factory=dict)  # signal -> "preset"/"override"/...
    # What was refused or did not answer for this ModelDeployment alone (a bad series, a
    # failing override): those signals are missing, and the policy will not scale down.
    problems: tuple[str, ...] = ()


def _namespace_regex(namespaces: Sequence[str] | None) -> str | None:
    """A PromQL regex for the watched namespaces, or None (no restriction).

    kopf also accepts globs (`team-*`) and negations (`!kube-system`): globs become
    regexes; anything else drops the restriction, which only saves Prometheus work —
    series of pods the operator does not own are ignored by `aggregate` anyway."""
    if not namespaces:
        return None
    out: list[str] = []
    for name in sorted(namespaces):
        plain = name.replace("*", "a").replace("?", "a")
        if not _DNS_LABEL.match(plain):
            return None
        # DNS labels hold no regex or PromQL-string metacharacters but the globs.
        out.append(name.replace("*", ".*").replace("?", "."))
    return "|".join(out)


def _matchers(*, namespaces: Sequence[str] | None, pod_regex: str | None, extra: str = "") -> str:
    parts = [extra] if extra else []
    regex = _namespace_regex(namespaces)
    if regex:
        parts.append(f'namespace=~"{regex}"')
    if pod_regex:
        parts.append(f'pod=~"{pod_regex}"')
    return "{" + ",".join(parts) + "}"


def presets(
    *,
    backend: str,
    latency_signal: str = "TimeToFirstToken",
    rate_window: str = "1m",
    namespaces: Sequence[str] | None = None,
    pod_regex: str | None = None,
) -> dict[str, Query]:
    """The batched queries for every ModelDeployment of one backend (and latency signal).

    `namespaces` / `pod_regex` restrict the series Prometheus returns (e.g. the watched
    namespaces); they do not change the number of queries."""

    def sel(extra: str = "") -> str:
        return _matchers(namespaces=namespaces, pod_regex=pod_regex, extra=extra)

    def rate(metric: str, extra: str = "") -> str:
        return f"rate({metric}{sel(extra)}[{rate_window}])"

    def per_pod(expr: str) -> str:
        return f"sum by (namespace, pod) ({expr})"

    def newest(metric: str) -> str:
        return f"max by (namespace, pod) (timestamp({metric}{sel()}))"

    p99_matcher = sel('quantile="0.99"')
    waiting_matcher = sel('request_type="waiting"')
    core_latency = {
        LATENCY_P99: Query(
            LATENCY_P99,
            f"max by (namespace, pod) (nv_inference_request_summary_us{p99_matcher})",
            Kind.MAX,
            scale=1e-6,
        ),
        LATENCY_P99_MEAN: Query(
            LATENCY_P99_MEAN,
            f"label_replace({per_pod(rate('nv_inference_request_duration_us'))}, "
            f'"part", "num", "", "") or label_replace('
            f'{per_pod(rate("nv_inference_request_success"))}, "part", "den", "", "")',
            Kind.RATIO,
            scale=1e-6,
        ),
    }
    if backend == "vllm":
        histogram = VLLM_LATENCY_HISTOGRAMS.get(latency_signal)
        if histogram is None:
            raise ValueError(f"unknown latency signal {latency_signal!r}")
        return {
            TOKEN_RATE: Query(TOKEN_RATE, per_pod(rate("vllm:generation_tokens_total")), Kind.SUM),
            PROMPT_TOKEN_RATE: Query(
                PROMPT_TOKEN_RATE, per_pod(rate("vllm:prompt_tokens_total")), Kind.SUM
            ),
            REQUEST_RATE: Query(
                REQUEST_RATE, per_pod(rate("vllm:e2e_request_latency_seconds_count")), Kind.SUM
            ),
            LATENCY_P99: Query(
                LATENCY_P99,
                f"sum by (namespace, pod, le) ({rate(histogram)})",
                Kind.HISTOGRAM,
            ),
            QUEUE_DEPTH: Query(QUEUE_DEPTH, per_pod(f"vllm:num_requests_waiting{sel()}"), Kind.SUM),
            SAMPLE_TIME: Query(SAMPLE_TIME, newest("vllm:generation_tokens_total"), Kind.OLDEST),
        }
    if backend == "tensorrtllm":
        return {
            TOKEN_RATE: Query(TOKEN_RATE, per_pod(rate("nv_llm_output_token_len_sum")), Kind.SUM),
            PROMPT_TOKEN_RATE: Query(
                PROMPT_TOKEN_RATE, per_pod(rate("nv_llm_input_token_len_sum")), Kind.SUM
            ),
            REQUEST_RATE: Query(
                REQUEST_RATE, per_pod(rate("nv_inference_request_success")), Kind.SUM
            ),
            **core_latency,
            QUEUE_DEPTH: Query(
                QUEUE_DEPTH,
                per_pod(f"nv_trt_llm_request_metrics{waiting_matcher}"),
                Kind.SUM,
            ),
            SAMPLE_TIME: Query(SAMPLE_TIME, newest("nv_inference_request_success"), Kind.OLDEST),
        }
    if backend in TRITON_CORE_BACKENDS:
        served = per_pod(rate("nv_inference_count"))
        # `or served * 0`: a pod with no failure series yet still reports its served rate.
        rejected = per_pod(rate("nv_inference_request_failure", 'reason="REJECTED"'))
        return {
            TOKEN_RATE: Query(TOKEN_RATE, f"{served} + ({rejected} or {served} * 0)", Kind.SUM),
            REQUEST_RATE: Query(
                REQUEST_RATE, per_pod(rate("nv_inference_request_success")), Kind.SUM
            ),
            **core_latency,
            QUEUE_DEPTH: Query(
                QUEUE_DEPTH, per_pod(f"nv_inference_pending_request_count{sel()}"), Kind.SUM
            ),
            SAMPLE_TIME: Query(SAMPLE_TIME, newest("nv_inference_request_success"), Kind.OLDEST),
        }
    raise ValueError(f"unknown backend {backend!r}")


def override(signal: str, expr: str) -> Query:
    """A spec's PromQL for one signal of one ModelDeployment (one query per MD)."""
    if signal not in OVERRIDABLE:
        raise ValueError(f"signal {signal!r} cannot be overridden")
    return Query(signal, expr, Kind.OVERRIDE)


# ---------------------------------------------------------------- histogram_quantile


def bucket_quantile(q: float, buckets: Iterable[tuple[float, float]]) -> float:
    """Prometheus's `histogram_quantile` on (upper bound, cumulative count) pairs.

    Same rules as promql/quantile.go (Prometheus 2.x `bucketQuantile`): sort by upper
    bound, merge equal bounds, force counts monotonic, NaN without a +Inf bucket, fewer
    than two buckets or no observations; linear interpolation inside the bucket (from 0
    for the first bucket if its bound is positive); the upper bound of the second-highest
    bucket if the rank falls into +Inf. Hand-written because the adapter must aggregate
    buckets per ModelDeployment (from one by-pod query) before taking the quantile."""
    if math.isnan(q):
        return math.nan
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    merged: dict[float, float] = defaultdict(float)
    for upper, count in buckets:
        merged[upper] += count
    b = sorted(merged.items())
    if not b or not math.isinf(b[-1][0]) or b[-1][0] < 0:
        return math.nan
    running = -math.inf
    fixed: list[tuple[float, float]] = []
    for upper, count in b:  # ensureMonotonic
        running = max(running, count)
        fixed.append((upper, running))
    if len(fixed) < 2:
        return math.nan
    observations = fixed[-1][1]
    if observations == 0 or math.isnan(observations):
        return math.nan
    rank = q * observations
    # sort.Search over all but the +Inf bucket: first index with count >= rank.
    i = next((j for j in range(len(fixed) - 1) if fixed[j][1] >= rank), len(fixed) - 1)
    if i == len(fixed) - 1:
        return fixed[-2][0]
    if i == 0 and fixed[0][0] <= 0:
        return fixed[0][0]
    start, end, count = 0.0, fixed[i][0], fixed[i][1]
    if i > 0:
        start = fixed[i - 1][0]
        count -= fixed[i - 1][1]
        rank -= fixed[i - 1][1]
    return start + (end - start) * (rank / count)


def _parse_le(raw: str) -> float:
    return math.inf if raw in ("+Inf", "Inf", "inf") else float(raw)


# ------------------------------------------------------------------------ aggregation


@dataclass(frozen=True)
class Aggregate:
    """Per-ModelDeployment values of one query, and why some were refused: a series a
    ModelDeployment's pods (or its override) returned that cannot be right (+Inf, a
    negative rate, a bucket bound that is not a number) makes that signal missing for
    that ModelDeployment alone, never for the others in the batch."""

    values: dict[Key, float]
    problems: dict[Key, str]


def _bad_value(value: float) -> str | None:
    if math.isinf(value):
        return f"{value:+}"
    if value < 0:
        return f"negative ({value:g})"
    return None


def aggregate_checked(
    query: Query, samples: Iterable[Sample], *, owners: Mapping[tuple[str, str], Key]
) -> Aggregate:
    """Per-ModelDeployment values of one batched query. `owners` maps (namespace, pod) to
    the ModelDeployment key; series of pods not in it are ignored. NaN values (a rate or
    summary with no requests) are skipped; impossible ones are refused (`Aggregate`)."""
    groups: dict[Key, list[Sample]] = defaultdict(list)
    problems: dict[Key, str] = {}
    for s in samples:
        pod = s.labels.get("pod", "")
        key = owners.get((s.labels.get("namespace", ""), pod))
        if key is None or key in problems or math.isnan(s.value):
            continue
        bad = _bad_value(s.value)
        if bad is not None:
            problems[key] = f"{query.signal}: pod {pod} reported {bad}"
            continue
        if query.kind == Kind.HISTOGRAM and _bucket_bound(s.labels.get("le")) is None:
            problems[key] = f"{query.signal}: pod {pod} has a bucket le={s.labels.get('le')!r}"
            continue
        groups[key].append(s)
    out: dict[Key, float] = {}
    for key, group in groups.items():
        if key in problems:
            continue
        value = _combine(query, group)
        if value is not None and not math.isnan(value):
            out[key] = value * query.scale if query.kind != Kind.OLDEST else value
    return Aggregate(values=out, problems=problems)


def aggregate(
    query: Query, samples: Iterable[Sample], *, owners: Mapping[tuple[str, str], Key]
) -> dict[Key, float]:
    """`aggregate_checked(...).values`."""
    return aggregate_checked(query, samples, owners=owners).values


def _bucket_bound(raw: str | None) -> float | None:
    if raw is None:
        return None
    try:
        bound = _parse_le(raw)
    except ValueError:
        return None
    return None if math.isnan(bound) else bound


def _combine(query: Query, group: Sequence[Sample]) -> float | None:
    if query.kind == Kind.SUM:
        return sum(s.value for s in group)
    if query.kind == Kind.MAX:
        return max(s.value for s in group)
    if query.kind == Kind.OLDEST:
        return min(s.value for s in group)
    if query.kind == Kind.HISTOGRAM:
        buckets = [(_parse_le(s.labels["le"]), s.value) for s in group]
        return bucket_quantile(query.quantile, buckets)
    if query.kind == Kind.RATIO:
        num = sum(s.value for s in group if s.labels.get("part") == "num")
        den = sum(s.value for s in group if s.labels.get("part") == "den")
        return num / den if den > 0 else None
    raise ValueError(f"{query.kind} is not a batched kind")


def aggregate_override(query: Query, samples: Iterable[Sample], *, key: Key) -> float | None:
    """Value of a per-ModelDeployment override query for `key`; raises ValueError (with
    what to fix) for a value that cannot be right (+Inf, negative)."""
    namespace, name = key
    values = [
        s.value
        for s in samples
        if s.labels.get("namespace", namespace) == namespace
        and s.labels.get("modeldeployment", name) == name
        and not math.isnan(s.value)
    ]
    for value in values:
        bad = _bad_value(value)
        if bad is not None:
            raise ValueError(f"{query.signal}: the override returned {bad}")
    return sum(values) if values else None


def reporting_pods(
    samples: Iterable[Sample], *, owners: Mapping[tuple[str, str], Key]
) -> dict[Key, int]:
    """Pods per ModelDeployment that returned a series (for the sample-time query)."""
    out: dict[Key, int] = defaultdict(int)
    for s in samples:
        key = owners.get((s.labels.get("namespace", ""), s.labels.get("pod", "")))
        if key is not None:
            out[key] += 1
    return dict(out)


def parse_vector(result: Sequence[Mapping[str, Any]]) -> list[Sample]:
    """Prometheus's `/api/v1/query` vector result -> samples."""
    out: list[Sample] = []
    for item in result:
        ts, raw = item["value"]
        out.append(
            Sample(labels=dict(item.get("metric") or {}), value=float(raw), timestamp=float(ts))
        )
    return out


def owner_by_deployment(
    deployments: Mapping[tuple[str, str], Key],
) -> Callable[[str, str], Key | None]:
    """Owner lookup by pod name for pods that no longer exist (range queries): a
    Deployment `NAME`'s pods are `NAME-<template hash>-<suffix>`. `deployments` maps
    (namespace, Deployment name) to the ModelDeployment key."""
    pattern = re.compile(r"^(?P<deploy>.+)-[a-z0-9]{1,10}-[a-z0-9]{5}$")

    def owner_of(namespace: str, pod: str) -> Key | None:
        m = pattern.match(pod)
        return deployments.get((namespace, m.group("deploy"))) if m else None

    return owner_of
