"""PromQL presets, histogram_quantile semantics and per-ModelDeployment aggregation."""

from __future__ import annotations

import math

import pytest

from modelscale.metrics import promql
from modelscale.metrics.promql import Kind, Sample

INF = math.inf
# vLLM-like TTFT buckets, cumulative counts of 100 observations.
BUCKETS = [(0.1, 10.0), (0.5, 60.0), (1.0, 90.0), (2.0, 98.0), (5.0, 100.0), (INF, 100.0)]


@pytest.mark.parametrize(
    ("q", "buckets", "want"),
    [
        pytest.param(0.5, BUCKETS, 0.1 + 0.4 * (40 / 50), id="median-interpolated"),
        pytest.param(0.99, BUCKETS, 2.0 + 3.0 * (1 / 2), id="p99"),
        pytest.param(0.05, BUCKETS, 0.1 * 0.5, id="first-bucket-from-zero"),
        pytest.param(1.0, [(1.0, 5.0), (2.0, 8.0), (INF, 10.0)], 2.0, id="rank-in-inf-bucket"),
        pytest.param(0.5, [(-1.0, 5.0), (0.0, 6.0), (INF, 10.0)], -1.0, id="negative-first-bound"),
        pytest.param(0.5, [(1.0, 5.0), (2.0, 10.0)], math.nan, id="no-inf-bucket"),
        pytest.param(0.5, [(1.0, 0.0), (INF, 0.0)], math.nan, id="no-observations"),
        pytest.param(0.5, [(INF, 10.0)], math.nan, id="single-bucket"),
        pytest.param(
            0.5, [(1.0, 6.0), (2.0, 4.0), (INF, 10.0)], 1.0 * (5 / 6), id="non-monotonic-fixed"
        ),
        pytest.param(
            0.5, [(1.0, 2.0), (1.0, 3.0), (2.0, 10.0), (INF, 10.0)], 1.0 * (5 / 5), id="merge-le"
        ),
        pytest.param(-0.1, BUCKETS, -INF, id="q-below-0"),
        pytest.param(1.1, BUCKETS, INF, id="q-above-1"),
    ],
)
def test_bucket_quantile_matches_prometheus_rules(
    q: float, buckets: list[tuple[float, float]], want: float
) -> None:
    got = promql.bucket_quantile(q, buckets)
    if math.isnan(want):
        assert math.isnan(got)
    else:
        assert got == pytest.approx(want)


@pytest.mark.parametrize("backend", ["vllm", "tensorrtllm", "python", "onnxruntime", "other"])
def test_presets_batch_every_signal_by_namespace_and_pod(backend: str) -> None:
    queries = promql.presets(backend=backend)
    assert {promql.TOKEN_RATE, promql.LATENCY_P99, promql.QUEUE_DEPTH, promql.SAMPLE_TIME} <= set(
        queries
    )
    for q in queries.values():
        assert "by (namespace, pod" in q.expr
        if q.kind == Kind.HISTOGRAM:
            assert "by (namespace, pod, le)" in q.expr


@pytest.mark.parametrize(
    ("signal", "metric"),
    [
        ("TimeToFirstToken", "vllm:time_to_first_token_seconds_bucket"),
        ("TimePerOutputToken", "vllm:time_per_output_token_seconds_bucket"),
        ("EndToEnd", "vllm:e2e_request_latency_seconds_bucket"),
    ],
)
def test_vllm_latency_preset_follows_the_slo_signal(signal: str, metric: str) -> None:
    q = promql.presets(backend="vllm", latency_signal=signal)[promql.LATENCY_P99]
    assert metric in q.expr and q.kind == Kind.HISTOGRAM


@pytest.mark.parametrize(
    ("namespaces", "matcher"),
    [
        pytest.param(["team-b", "team-a"], 'namespace=~"team-a|team-b"', id="names"),
        pytest.param(["team-*", "ml"], 'namespace=~"ml|team-.*"', id="kopf-glob"),
        pytest.param(["!kube-system"], None, id="kopf-negation-unrestricted"),
        pytest.param(['a"} or up{'], None, id="injection-unrestricted"),
    ],
)
def test_watched_namespaces_restrict_the_series(namespaces: list[str], matcher: str | None) -> None:
    for q in promql.presets(backend="vllm", namespaces=namespaces).values():
        if matcher is None:
            assert "namespace=~" not in q.expr
        else:
            assert matcher in q.expr


def test_restrictions_and_rate_window_go_into_every_selector() -> None:
    queries = promql.presets(
        backend="vllm", rate_window="2m", namespaces=["team-b", "team-a"], pod_regex="llama-.*"
    )
    for q in queries.values():
        assert 'namespace=~"team-a|team-b"' in q.expr
        assert 'pod=~"llama-.*"' in q.expr
    assert "[2m]" in queries[promql.TOKEN_RATE].expr


@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param({"backend": "tgi"}, id="unknown-backend"),
        pytest.param({"backend": "vllm", "latency_signal": "P50"}, id="unknown-signal"),
    ],
)
def test_bad_preset_arguments_are_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        promql.presets(**kwargs)  # type: ignore[arg-type]


OWNERS = {
    ("ns1", "a-1"): ("ns1", "a"),
    ("ns1", "a-2"): ("ns1", "a"),
    ("ns2", "b-1"): ("ns2", "b"),
}


def s(ns: str, pod: str, value: float, **labels: str) -> Sample:
    return Sample(labels={"namespace": ns, "pod": pod, **labels}, value=value, timestamp=100.0)


def test_sum_per_modeldeployment_ignores_foreign_pods_and_nan() -> None:
    q = promql.presets(backend="vllm")[promql.TOKEN_RATE]
    samples = [
        s("ns1", "a-1", 100.0),
        s("ns1", "a-2", 50.0),
        s("ns2", "b-1", 7.0),
        s("ns2", "b-2", math.nan),
        s("ns3", "other", 1e6),
    ]
    assert promql.aggregate(q, samples, owners=OWNERS) == {("ns1", "a"): 150.0, ("ns2", "b"): 7.0}


def test_histogram_is_summed_per_modeldeployment_before_the_quantile() -> None:
    """Pod a-1 is fast, a-2 slow: the MD's P99 is that of the merged distribution."""
    q = promql.presets(backend="vllm")[promql.LATENCY_P99]
    fast = [(0.5, 99.0), (1.0, 100.0), (2.0, 100.0), ("+Inf", 100.0)]
    slow = [(0.5, 0.0), (1.0, 0.0), (2.0, 10.0), ("+Inf", 10.0)]
    samples = [s("ns1", "a-1", c, le=str(le)) for le, c in fast]
    samples += [s("ns1", "a-2", c, le=str(le)) for le, c in slow]
    merged = [(0.5, 99.0), (1.0, 100.0), (2.0, 110.0), (INF, 110.0)]
    got = promql.aggregate(q, samples, owners=OWNERS)[("ns1", "a")]
    assert got == pytest.approx(promql.bucket_quantile(0.99, merged))
    assert got == pytest.approx(1.0 + 1.0 * (0.99 * 110 - 100) / 10)


@pytest.mark.parametrize(
    ("kind", "values", "want"),
    [
        pytest.param(Kind.MAX, [0.2e6, 0.9e6], 0.9, id="summary-p99-slowest-pod"),
        pytest.param(Kind.OLDEST, [1000.0, 940.0], 940.0, id="sample-time-oldest-pod"),
    ],
)
def test_max_and_oldest(kind: Kind, values: list[float], want: float) -> None:
    q = promql.Query("x", "x", kind, scale=1e-6 if kind == Kind.MAX else 1.0)
    samples = [s("ns1", f"a-{i + 1}", v) for i, v in enumerate(values)]
    assert promql.aggregate(q, samples, owners=OWNERS) == {("ns1", "a"): pytest.approx(want)}


def test_mean_latency_fallback_divides_summed_rates() -> None:
    q = promql.presets(backend="python")[promql.LATENCY_P99_MEAN]
    samples = [
        s("ns1", "a-1", 3e6, part="num"),
        s("ns1", "a-1", 2.0, part="den"),
        s("ns1", "a-2", 1e6, part="num"),
        s("ns1", "a-2", 2.0, part="den"),
        s("ns2", "b-1", 5e6, part="num"),
        s("ns2", "b-1", 0.0, part="den"),  # no requests: no value, not a division by 0
    ]
    assert promql.aggregate(q, samples, owners=OWNERS) == {("ns1", "a"): pytest.approx(1.0)}


def test_override_keeps_only_series_of_its_modeldeployment() -> None:
    q = promql.override(promql.TOKEN_RATE, "sum by (namespace, modeldeployment) (x)")
    samples = [
        Sample({"namespace": "ns1", "modeldeployment": "a"}, 10.0, 1.0),
        Sample({"namespace": "ns1", "modeldeployment": "z"}, 99.0, 1.0),
        Sample({"namespace": "ns9", "modeldeployment": "a"}, 99.0, 1.0),
    ]
    assert promql.aggregate_override(q, samples, key=("ns1", "a")) == 10.0
    assert promql.aggregate_override(q, [Sample({}, 4.0, 1.0)], key=("ns1", "a")) == 4.0
    assert promql.aggregate_override(q, [], key=("ns1", "a")) is None


@pytest.mark.parametrize(
    ("pod", "want"),
    [
        ("llama-server-7d9f8b6c5d-x2k4p", ("ns1", "llama")),
        ("llama-server-canary-7d9f8b6c5d-x2k4p", None),
        ("llama-server", None),
    ],
)
def test_history_owner_by_deployment_pod_names(pod: str, want: tuple[str, str] | None) -> None:
    owner_of = promql.owner_by_deployment({("ns1", "llama-server"): ("ns1", "llama")})
    assert owner_of("ns1", pod) == want


def test_parse_vector() -> None:
    result = [{"metric": {"namespace": "n", "pod": "p"}, "value": [1700000000.5, "12.5"]}]
    assert promql.parse_vector(result) == [
        Sample({"namespace": "n", "pod": "p"}, 12.5, 1.7e9 + 0.5)
    ]


GOOD_B = [s("ns2", "b-1", c, le=le) for le, c in (("1", 5.0), ("+Inf", 10.0))]


@pytest.mark.parametrize(
    ("signal", "bad", "problem"),
    [
        pytest.param(
            promql.LATENCY_P99,
            [s("ns1", "a-1", 3.0, le="abc"), s("ns1", "a-1", 5.0, le="+Inf")],
            "latency_p99: pod a-1 has a bucket le='abc'",
            id="bucket-le-abc",
        ),
        pytest.param(
            promql.LATENCY_P99,
            [s("ns1", "a-1", 3.0, le="NaN"), s("ns1", "a-1", 5.0, le="+Inf")],
            "latency_p99: pod a-1 has a bucket le='NaN'",
            id="bucket-le-nan",
        ),
        pytest.param(
            promql.TOKEN_RATE,
            [s("ns1", "a-1", 10.0), s("ns1", "a-2", INF)],
            "token_rate: pod a-2 reported +inf",
            id="rate-plus-inf",
        ),
        pytest.param(
            promql.TOKEN_RATE,
            [s("ns1", "a-1", 10.0), s("ns1", "a-2", -3.0)],
            "token_rate: pod a-2 reported negative (-3)",
            id="rate-negative",
        ),
    ],
)
def test_an_impossible_series_refuses_that_modeldeployment_alone(
    signal: str, bad: list[Sample], problem: str
) -> None:
    q = promql.presets(backend="vllm")[signal]
    others = GOOD_B if q.kind == Kind.HISTOGRAM else [s("ns2", "b-1", 7.0)]
    got = promql.aggregate_checked(q, [*bad, *others], owners=OWNERS)
    assert got.problems == {("ns1", "a"): problem}
    assert set(got.values) == {("ns2", "b")}  # b's value is untouched


def test_nan_means_no_requests_and_is_no_problem() -> None:
    q = promql.presets(backend="vllm")[promql.TOKEN_RATE]
    got = promql.aggregate_checked(q, [s("ns1", "a-1", math.nan)], owners=OWNERS)
    assert got.values == {} and got.problems == {}


@pytest.mark.parametrize("value", [INF, -1.0], ids=["inf", "negative"])
def test_an_override_returning_an_impossible_value_says_what_to_fix(value: float) -> None:
    q = promql.override(promql.TOKEN_RATE, "x")
    with pytest.raises(ValueError, match="token_rate: the override returned"):
        promql.aggregate_override(q, [Sample({}, value, 1.0)], key=("ns1", "a"))


def test_triton_core_demand_counts_what_triton_shed() -> None:
    # A spec.serving queue policy refuses work with reason REJECTED: it is demand the pods
    # could not serve, so the token-rate signal must include it (and only it).
    expr = promql.presets(backend="python")[promql.TOKEN_RATE].expr
    assert 'nv_inference_request_failure{reason="REJECTED"}' in expr
    assert "BACKEND" not in expr
    # A pod that never failed has no failure series: its served rate must still count.
    assert " or " in expr
