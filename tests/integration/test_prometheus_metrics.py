"""The metrics layer against a real Prometheus, on exactly known backfilled history.

History for fake pods of several namespaces and ModelDeployments is written as
OpenMetrics, backfilled with `promtool tsdb create-blocks-from openmetrics`, and served by
a `prometheus` started on that TSDB. Every query is evaluated at one fixed time, so the
expected token rates, queue depths and P99s are exact.
"""

from __future__ import annotations

import math
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from modelscale import podfacts
from modelscale.api.v1alpha1 import ModelDeployment
from modelscale.autoscaling import recommender
from modelscale.autoscaling.types import Observation, PolicyConfig, ScalingState
from modelscale.metrics import batch, groups, prometheus, promql
from modelscale.podfacts import PodFacts

pytestmark = pytest.mark.prometheus

T = 1_700_000_040.0  # evaluation time (a multiple of the 15 s step)
START = T - 3600
STEP = 15
LABELS = 'model="llama",version="1"'
LE = ("0.1", "0.25", "0.5", "1", "2.5", "+Inf")


class Pod:
    def __init__(
        self,
        ns: str,
        md: str,
        name: str,
        *,
        tokens: float = 0.0,  # output tokens/s
        prompt: float = 0.0,
        ttft: tuple[int, ...] | None = None,  # per 15 s, cumulative per LE
        waiting: float = 0.0,
        last: float = T,  # time of the pod's last sample
        core: dict[str, float] | None = None,  # Triton core per-second rates
        summary_p99_us: float | None = None,
        failures: dict[str, float] | None = None,  # nv_inference_request_failure/s by reason
    ) -> None:
        self.ns, self.md, self.name = ns, md, name
        self.tokens, self.prompt, self.ttft, self.waiting = tokens, prompt, ttft, waiting
        self.last, self.core, self.summary_p99_us = last, core, summary_p99_us
        self.failures = failures or {}

    @property
    def key(self) -> tuple[str, str]:
        return (self.ns, self.md)

    def sel(self, extra: str = "") -> str:
        more = f",{extra}" if extra else ""
        return f'{{namespace="{self.ns}",pod="{self.name}",{LABELS}{more}}}'

    def times(self) -> list[int]:
        return [int(START) + STEP * i for i in range(int((self.last - START) // STEP) + 1)]


FAST = (30, 60, 75, 80, 80, 80)
SLOW = (0, 5, 10, 20, 40, 40)
PODS = [
    Pod(
        "team-a",
        "alpha",
        "alpha-server-5d8f7c9b4-k2x9p",
        tokens=100,
        prompt=400,
        ttft=FAST,
        waiting=2,
    ),
    Pod(
        "team-a",
        "alpha",
        "alpha-server-5d8f7c9b4-m7q3z",
        tokens=50,
        prompt=100,
        ttft=SLOW,
        waiting=3,
    ),
    Pod("team-b", "beta", "beta-server-6b7c8d9f5-a1b2c", tokens=20, prompt=10, ttft=SLOW),
    Pod("team-b", "partial", "partial-server-7c8d9f5b6-aaaaa", tokens=30, ttft=FAST),
    Pod("team-b", "partial", "partial-server-7c8d9f5b6-bbbbb", tokens=30, ttft=FAST, last=T - 120),
    Pod("team-b", "stale", "stale-server-8d9f5b6c7-ccccc", tokens=40, ttft=FAST, last=T - 180),
    Pod(
        "team-c",
        "gamma",
        "gamma-server-9f5b6c7d8-ddddd",
        core={"count": 10, "success": 5, "duration_us": 5 * 200_000, "pending": 4},
        summary_p99_us=450_000,
        failures={"REJECTED": 3, "BACKEND": 7},
    ),
    Pod(
        "team-c",
        "delta",
        "delta-server-5b6c7d8e9-eeeee",
        core={"count": 2, "success": 2, "duration_us": 2 * 100_000, "pending": 0},
    ),
    *[
        Pod("team-f", f"filler-{i}", f"filler-{i}-server-6c7d8e9f5-f{i:04d}", tokens=10 * (i + 1))
        for i in range(50)
    ],
]
ALL = {(p.ns, p.name): p.key for p in PODS}


def openmetrics() -> str:
    out: list[str] = []

    def counter(family: str, sample: str, rate_of: str) -> None:
        out.append(f"# TYPE {family} counter")
        for p in PODS:
            rate = getattr(p, rate_of)
            if p.core is None:
                for i, t in enumerate(p.times()):
                    out.append(f"{sample}{p.sel()} {rate * STEP * i:g} {t}")

    counter("vllm:generation_tokens", "vllm:generation_tokens_total", "tokens")
    counter("vllm:prompt_tokens", "vllm:prompt_tokens_total", "prompt")

    for family in ("vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds"):
        out.append(f"# TYPE {family} histogram")
        for p in PODS:
            if p.ttft is None:
                continue
            for i, t in enumerate(p.times()):
                for le, per_step in zip(LE, p.ttft, strict=True):
                    bucket = p.sel('le="' + le + '"')
                    out.append(f"{family}_bucket{bucket} {per_step * i} {t}")
                out.append(f"{family}_count{p.sel()} {p.ttft[-1] * i} {t}")
                out.append(f"{family}_sum{p.sel()} {0.3 * p.ttft[-1] * i:g} {t}")

    out.append("# TYPE vllm:num_requests_waiting gauge")
    for p in PODS:
        if p.core is None:
            out.extend(f"vllm:num_requests_waiting{p.sel()} {p.waiting:g} {t}" for t in p.times())

    for name, field in (
        ("nv_inference_count", "count"),
        ("nv_inference_request_success", "success"),
        ("nv_inference_request_duration_us", "duration_us"),
    ):
        out.append(f"# TYPE {name} unknown")  # Triton counters lack OpenMetrics' _total
        for p in PODS:
            if p.core is not None:
                out.extend(
                    f"{name}{p.sel()} {p.core[field] * STEP * i:g} {t}"
                    for i, t in enumerate(p.times())
                )
    out.append("# TYPE nv_inference_request_failure unknown")
    for p in PODS:
        for reason, per_s in p.failures.items():
            series = p.sel('reason="' + reason + '"')
            out.extend(
                f"nv_inference_request_failure{series} {per_s * STEP * i:g} {t}"
                for i, t in enumerate(p.times())
            )
    out.append("# TYPE nv_inference_pending_request_count gauge")
    for p in PODS:
        if p.core is not None:
            out.extend(
                f"nv_inference_pending_request_count{p.sel()} {p.core['pending']:g} {t}"
                for t in p.times()
            )
    out.append("# TYPE nv_inference_request_summary_us summary")
    for p in PODS:
        if p.summary_p99_us is not None:
            for t in p.times():
                q = p.sel('quantile="0.99"')
                out.append(f"nv_inference_request_summary_us{q} {p.summary_p99_us:g} {t}")
    out.append("# EOF")
    return "\n".join(out) + "\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def prometheus_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if binary is None or promtool is None:
        pytest.fail("prometheus/promtool not installed: run `make prometheus-install`")
    root: Path = tmp_path_factory.mktemp("prometheus")
    data = root / "data"
    source = root / "history.om"
    source.write_text(openmetrics())
    subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(data)],
        check=True,
        capture_output=True,
    )
    config = root / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 15s\n")
    port = free_port()
    log = (root / "prometheus.log").open("w")
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={data}",
            "--storage.tsdb.retention.time=100y",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"prometheus exited: {(root / 'prometheus.log').read_text()[-2000:]}")
            try:
                if requests.get(f"{url}/-/ready", timeout=1).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("prometheus not ready after 60 s")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def fetch(url: str, backend: str = "vllm", **kwargs: object) -> prometheus.FetchResult:
    return prometheus.fetch_signals(
        url=url,
        queries=promql.presets(backend=backend),
        pods=ALL,
        timeout=2.5,  # fractional: Prometheus takes seconds, not "2.5s"
        time=T,
        **kwargs,  # type: ignore[arg-type]
    )


def prom_scalar(url: str, expr: str) -> float:
    params: dict[str, str | float] = {"query": expr, "time": T}
    r = requests.get(f"{url}/api/v1/query", params=params, timeout=10)
    r.raise_for_status()
    result = r.json()["data"]["result"]
    assert len(result) == 1, result
    return float(result[0]["value"][1])


def test_token_rates_and_queues_per_modeldeployment_are_exact(prometheus_url: str) -> None:
    sig = fetch(prometheus_url).signals
    assert sig[("team-a", "alpha")].token_rate == pytest.approx(150.0, rel=1e-9)
    assert sig[("team-a", "alpha")].prompt_token_rate == pytest.approx(500.0, rel=1e-9)
    assert sig[("team-a", "alpha")].request_rate == pytest.approx(120 / 15, rel=1e-9)
    assert sig[("team-a", "alpha")].queue_depth == 5.0
    assert sig[("team-b", "beta")].token_rate == pytest.approx(20.0, rel=1e-9)
    for i in range(50):
        assert sig[("team-f", f"filler-{i}")].token_rate == pytest.approx(10.0 * (i + 1))


@pytest.mark.parametrize(
    ("key", "pod_regex"),
    [
        pytest.param(("team-a", "alpha"), "alpha-server-.*", id="alpha-two-pods"),
        pytest.param(("team-b", "beta"), "beta-server-.*", id="beta-one-pod"),
    ],
)
def test_p99_equals_prometheus_histogram_quantile(
    prometheus_url: str, key: tuple[str, str], pod_regex: str
) -> None:
    ns, _ = key
    expected = prom_scalar(
        prometheus_url,
        "histogram_quantile(0.99, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket"
        f'{{namespace="{ns}",pod=~"{pod_regex}"}}[1m])))',
    )
    got = fetch(prometheus_url).signals[key].p99_seconds
    assert got is not None and not math.isnan(expected)
    assert got == pytest.approx(expected, rel=1e-12)
    assert 1.0 < got < 2.5  # interpolated inside a bucket, not a bucket bound


def test_triton_core_summary_p99_and_mean_fallback(prometheus_url: str) -> None:
    sig = fetch(prometheus_url, backend="python").signals
    gamma, delta = sig[("team-c", "gamma")], sig[("team-c", "delta")]
    assert gamma.p99_seconds == pytest.approx(0.45)
    assert gamma.sources["latency_p99"] == "preset"
    # Served 10/s plus shed 3/s (Triton's REJECTED, a spec.serving queue policy's refusals;
    # backend failures are not demand); delta has no failure series at all.
    assert gamma.token_rate == pytest.approx(13.0)
    assert delta.token_rate == pytest.approx(2.0)
    assert gamma.request_rate == pytest.approx(5.0)
    assert gamma.queue_depth == 4.0
    assert delta.p99_seconds == pytest.approx(0.1)  # no summary: mean latency
    assert delta.sources["latency_p99"] == "mean-fallback"


def test_one_query_per_signal_for_one_or_fifty_modeldeployments(prometheus_url: str) -> None:
    one = {k: v for k, v in ALL.items() if v == ("team-f", "filler-0")}
    fifty = {k: v for k, v in ALL.items() if k[0] == "team-f"}
    queries = promql.presets(backend="vllm")
    r1 = prometheus.fetch_signals(url=prometheus_url, queries=queries, pods=one, timeout=10, time=T)
    r50 = prometheus.fetch_signals(
        url=prometheus_url, queries=queries, pods=fifty, timeout=10, time=T
    )
    assert len(r1.signals) == 1 and len(r50.signals) == 50
    assert r1.queries == r50.queries == len(queries)


def test_stale_pods_make_the_modeldeployment_stale(prometheus_url: str) -> None:
    sig = fetch(prometheus_url).signals
    stale, partial = sig[("team-b", "stale")], sig[("team-b", "partial")]
    assert stale.sample_time == T - 180
    assert stale.token_rate is None  # no sample inside the 1m rate window
    assert partial.sample_time == T - 120  # the oldest of its pods' newest samples
    assert partial.pods_reporting == 2
    assert sig[("team-a", "alpha")].sample_time == T

    state = ScalingState()
    for key, s in ((("team-b", "stale"), stale), (("team-b", "partial"), partial)):
        obs = Observation(
            now=T,
            token_rate=s.token_rate,
            p99_seconds=s.p99_seconds,
            queue_depth=s.queue_depth,
            sample_time=s.sample_time,
            warmed_replicas=3,
            current_replicas=3,
        )
        rec, _ = recommender.recommend(obs, config=PolicyConfig(), state=state)
        assert (rec.replicas, rec.reason) == (3, recommender.METRICS_STALE), key


def test_overrides_cost_one_query_each_and_win(prometheus_url: str) -> None:
    expr = (
        'label_replace(sum(rate(vllm:generation_tokens_total{namespace="team-b",'
        'pod=~"beta-.*"}[1m])) * 2, "modeldeployment", "beta", "", "")'
    )
    result = fetch(prometheus_url, overrides={("team-b", "beta"): {"token_rate": expr}})
    beta = result.signals[("team-b", "beta")]
    assert result.queries == len(promql.presets(backend="vllm")) + 1
    assert beta.token_rate == pytest.approx(40.0)
    assert beta.sources["token_rate"] == "override"
    assert beta.sample_time == T


def test_history_range_query_per_modeldeployment(prometheus_url: str) -> None:
    owner_of = promql.owner_by_deployment(
        {
            ("team-a", "alpha-server"): ("team-a", "alpha"),
            ("team-b", "beta-server"): ("team-b", "beta"),
        }
    )
    history = prometheus.fetch_history(
        url=prometheus_url,
        query=promql.presets(backend="vllm")[promql.TOKEN_RATE],
        owner_of=owner_of,
        start=T - 1800,
        end=T,
        step=60,
        timeout=10,
    )
    assert set(history) == {("team-a", "alpha"), ("team-b", "beta")}
    alpha = history[("team-a", "alpha")]
    assert [t for t, _ in alpha] == [T - 1800 + 60 * i for i in range(31)]
    assert all(v == pytest.approx(150.0) for _, v in alpha)
    # History bootstraps the forecaster: the first recommendation already has a model.
    state = recommender.bootstrap(ScalingState(), samples=alpha, config=PolicyConfig())
    assert state.model["ts"] == T


def test_an_unreachable_prometheus_raises_prometheus_error() -> None:
    with pytest.raises(prometheus.PrometheusError):
        prometheus.fetch_signals(
            url=f"http://127.0.0.1:{free_port()}",
            queries=promql.presets(backend="vllm"),
            pods=ALL,
            timeout=5,
            time=T,
        )


def test_a_typo_in_one_override_is_that_modeldeployments_problem_alone(
    prometheus_url: str,
) -> None:
    got = fetch(prometheus_url, overrides={("team-b", "beta"): {promql.TOKEN_RATE: "sum(("}})
    beta = got.signals[("team-b", "beta")]
    assert beta.token_rate is None and beta.sources[promql.TOKEN_RATE] == "override"
    assert len(beta.problems) == 1 and "override of token_rate" in beta.problems[0]
    assert "parse error" in beta.problems[0]  # Prometheus's own words reach the user
    alpha = got.signals[("team-a", "alpha")]
    assert alpha.token_rate == pytest.approx(150.0, rel=1e-9) and not alpha.problems


# --------------------------------------------------------------------------- the batcher


def serving_pod(ns: str, md: str, name: str) -> PodFacts:
    conditions = [{"type": t, "status": "True"} for t in ("Ready", podfacts.CONDITION_TYPE)]
    return podfacts.read(
        {
            "metadata": {"name": name, "namespace": ns, "labels": {podfacts.MD_LABEL: md}},
            "status": {"conditions": conditions},
        }
    )


def modeldeployment(ns: str, name: str, **prometheus_spec: object) -> ModelDeployment:
    return ModelDeployment.model_validate(
        {
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                "model": {"name": "llama", "repository": "/models"},
                "scaling": {"prometheus": prometheus_spec},
            },
        }
    )


def test_a_group_whose_prometheus_fails_is_absent_and_the_others_unaffected(
    prometheus_url: str,
) -> None:
    down = f"http://127.0.0.1:{free_port()}"  # nothing listens: connection refused
    mds = [
        modeldeployment("team-a", "alpha"),
        modeldeployment("team-b", "beta", url=down, timeoutSeconds=2),
    ]
    pods: dict[tuple[str, str], list[PodFacts]] = {}
    for p in PODS:
        if p.md in {"alpha", "beta"}:
            pods.setdefault(p.key, []).append(serving_pod(p.ns, p.md, p.name))
    plan = groups.plan(mds, pods_by_md=pods, default_url=prometheus_url)
    assert len(plan) == 2
    fetched = batch.fetch(plan, namespaces=(), now=T)
    assert set(fetched.signals) == {("team-a", "alpha")}
    assert fetched.signals[("team-a", "alpha")].token_rate == pytest.approx(150.0, rel=1e-9)
    assert fetched.errors == 1
    assert fetched.queries == len(promql.presets(backend="vllm"))
    with pytest.raises(prometheus.PrometheusError, match=re.escape(down)):
        batch.fetch(plan, namespaces=(), now=T, strict=True)


def test_one_tenants_slow_url_and_huge_timeout_cost_the_others_nothing(
    prometheus_url: str,
) -> None:
    """A ModelDeployment with a Prometheus that accepts and never answers and a 300 s
    timeout, one with a typo'd override and one with an unreachable URL: the others get
    their signals, and the whole fetch ends at the pass's deadline, reported per
    ModelDeployment."""
    from harness import faultservers  # noqa: PLC0415

    with faultservers.silent() as (host, port):
        hung = f"http://{host}:{port}"
        mds = [
            modeldeployment("team-a", "alpha"),
            modeldeployment("team-b", "beta", queries={"tokenRate": "sum(("}),
            modeldeployment("team-b", "partial", url=f"http://127.0.0.1:{free_port()}"),
            modeldeployment("team-b", "stale", url=hung, timeoutSeconds=300),
        ]
        pods: dict[tuple[str, str], list[PodFacts]] = {}
        for p in PODS:
            pods.setdefault(p.key, []).append(serving_pod(p.ns, p.md, p.name))
        plan = groups.plan(mds, pods_by_md=pods, default_url=prometheus_url)
        started = time.monotonic()
        fetched = batch.fetch(plan, namespaces=(), now=T, deadline=started + 3.0)
        took = time.monotonic() - started
    assert took < 3.5, f"the pass's fetch took {took:.2f} s"
    assert fetched.signals[("team-a", "alpha")].token_rate == pytest.approx(150.0, rel=1e-9)
    assert "override of token_rate" in fetched.signals[("team-b", "beta")].problems[0]
    assert set(fetched.unreachable) == {("team-b", "partial"), ("team-b", "stale")}
    assert fetched.late == {("team-b", "stale")}
    assert hung in fetched.unreachable[("team-b", "stale")]
