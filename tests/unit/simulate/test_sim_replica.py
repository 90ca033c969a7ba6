"""The calibrated replica model: KV-cache capacity, context-dependent costs, start-up
distribution, and the fluid capacity that the oracle's bound uses."""

from __future__ import annotations

import numpy as np
import pytest
from sim_trace import make_trace

from modelscale.simulate import engine, loadtest
from modelscale.simulate.engine import View
from modelscale.simulate.replica import (
    LLAMA_3_1_8B_KV_BYTES,
    ReplicaParams,
    Slo,
    kv_cache_tokens,
    sustainable_request_rate,
)
from modelscale.simulate.trace import Trace


class Hold:
    """Holds `replicas`; optionally scales to `then` at the first decision."""

    interval_s = 1.0
    warmup_gate = True

    def __init__(self, replicas: int, *, then: int | None = None) -> None:
        self.name = "hold"
        self.replicas, self.then = replicas, then

    def decide(self, view: View) -> int:
        return self.then if self.then is not None else self.replicas


def burst(n: int, *, inp: int, out: int, at: float = 1.0, duration: float = 300.0) -> Trace:
    """n requests arriving together (within 0.1 s)."""
    return make_trace("burst", at + np.linspace(0.0, 0.1, n), inp=inp, out=out, duration_s=duration)


def test_kv_capacity_is_derived_from_gpu_memory() -> None:
    assert LLAMA_3_1_8B_KV_BYTES == 128 * 1024  # 32 layers x 8 heads x 128 x 2 (K,V) x 2 B
    tokens = ReplicaParams().kv_capacity_tokens
    # ~19.5 GiB left for the KV cache on an A100-40GB: about 12 contexts of 12.5k tokens.
    assert 150_000 < tokens < 170_000
    assert tokens // 12_500 == 12
    # A model whose weights leave nothing is refused with a message, not a zero capacity.
    none_left = kv_cache_tokens(
        gpu_memory_gib=24.0,
        gpu_memory_utilization=0.9,
        weights_gib=30.0,
        runtime_gib=1.0,
        bytes_per_token=LLAMA_3_1_8B_KV_BYTES,
    )
    with pytest.raises(ValueError, match="no GPU memory for the KV cache"):
        ReplicaParams(kv_capacity_tokens=none_left)


@pytest.mark.parametrize(
    ("inp", "out", "expect_running"),
    [
        pytest.param(12_000, 500, ReplicaParams().kv_capacity_tokens // 12_500, id="long-contexts"),
        pytest.param(1_000, 100, 40, id="short-contexts-all-fit"),
    ],
)
def test_kv_cache_admits_fewer_long_sequences(inp: int, out: int, expect_running: int) -> None:
    tr = burst(40, inp=inp, out=out)
    result = engine.run(tr, Hold(1), params=ReplicaParams(), initial_replicas=1, sample_s=0.5)
    assert int(result.running.max()) == expect_running
    assert np.all(np.isfinite(result.ttft))  # the rest waited in the pod's queue, then ran
    assert result.kv_usage.max() <= 1.0


def test_context_longer_than_the_kv_cache_is_refused_as_a_miss() -> None:
    cap = ReplicaParams().kv_capacity_tokens
    tr = burst(3, inp=cap, out=10)
    result = engine.run(tr, Hold(1), params=ReplicaParams(), initial_replicas=1)
    assert result.rejected == 3
    assert np.all(np.isinf(result.ttft))
    assert result.windows is not None and not result.windows.met[0]


def test_decode_slows_with_the_batchs_context() -> None:
    # Prefill made instant, so decode is measured alone (prefill would slow it too).
    params = ReplicaParams(prefill_tokens_per_s=1e9, prefill_quadratic_s=0.0)

    def median_tpot(inp: int) -> float:
        result = engine.run(burst(8, inp=inp, out=400), Hold(1), params=params, initial_replicas=1)
        return float(np.median(result.tpot))

    short, long = median_tpot(100), median_tpot(12_000)
    # Same batch of 8; the long one reads ~8 x 12k more KV tokens per step.
    expected = params.itl(8, 8 * 12_200) / params.itl(8, 8 * 300)
    assert long / short == pytest.approx(expected, rel=0.1)
    assert long > 1.3 * short


def test_prefill_has_a_quadratic_term_for_long_prompts() -> None:
    params = ReplicaParams()
    for n in (1_000, 32_000):
        result = engine.run(burst(1, inp=n, out=2), Hold(1), params=params, initial_replicas=1)
        assert result.ttft[0] == pytest.approx(n / 8000 + 2.0e-9 * n * n, rel=0.01)
    assert params.prefill_s(32_000) > 1.25 * 32_000 / params.prefill_tokens_per_s


def test_startup_times_are_seeded_lognormal_within_bounds() -> None:
    params = ReplicaParams()
    tr = burst(1, inp=10, out=2, duration=400.0)

    def startups(seed: int) -> np.ndarray:  # type: ignore[type-arg]
        return engine.run(
            tr, Hold(1, then=200), params=params, initial_replicas=1, max_replicas=256, seed=seed
        ).startup_s

    a, b, c = startups(1), startups(1), startups(2)
    assert a.size == 199
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    lo, hi = params.startup_bounds()
    assert a.min() >= lo and a.max() <= hi
    assert np.median(a) == pytest.approx(params.startup_s, rel=0.08)
    # Spread as configured: log-std ~ startup_sigma.
    assert np.std(np.log(a)) == pytest.approx(params.startup_sigma, rel=0.2)
    fixed = engine.run(
        tr,
        Hold(1, then=5),
        params=ReplicaParams(startup_sigma=0.0),
        initial_replicas=1,
    ).startup_s
    assert np.all(fixed == params.startup_s)


def test_fluid_capacity_falls_with_context_and_is_zero_when_nothing_fits() -> None:
    params, slo = ReplicaParams(), Slo()
    short = sustainable_request_rate(params, mean_input=1000, mean_output=200, slo=slo)
    long = sustainable_request_rate(params, mean_input=12_000, mean_output=200, slo=slo)
    assert short > 0 and 0 < long < short / 4
    # A prompt whose prefill alone exceeds the TTFT target: 0, unless the SLO allows for it.
    assert sustainable_request_rate(params, mean_input=20_000, mean_output=200, slo=slo) == 0
    lenient = Slo(ttft_per_1k_input_s=0.5)
    assert sustainable_request_rate(params, mean_input=20_000, mean_output=200, slo=lenient) > 0
    too_big = params.kv_capacity_tokens
    assert sustainable_request_rate(params, mean_input=too_big, mean_output=1, slo=lenient) == 0


def test_slo_ttft_target_grows_with_the_prompt() -> None:
    slo = Slo(ttft_s=1.0, ttft_per_1k_input_s=0.25)
    assert slo.ttft_target(0) == 1.0
    assert slo.ttft_target(8000) == pytest.approx(3.0)
    assert np.allclose(slo.ttft_target(np.array([1000.0, 4000.0])), [1.25, 2.0])
    assert Slo().ttft_target(100_000) == Slo().ttft_s  # default: a fixed target


def test_loadtest_reports_running_requests_and_kv_usage_at_capacity() -> None:
    rng = np.random.default_rng(0)
    n = 500
    tr = make_trace(
        "mix",
        np.sort(rng.uniform(0, 100, n)),
        inp=rng.integers(200, 2000, n),
        out=rng.integers(50, 400, n),
        duration_s=100.0,
    )
    cap = loadtest.measure(tr, params=ReplicaParams(), slo=Slo())
    assert cap.request_rate > 0
    # Mean running requests (sampled) ~ in flight by Little's law: at capacity there is
    # hardly a queue.
    assert cap.running == pytest.approx(cap.concurrency, rel=0.2)
    assert 0.0 < cap.kv_usage < 1.0


def test_prefix_cache_hits_shorten_prefill() -> None:
    tr = burst(1, inp=8000, out=2)
    hit = Trace(
        tr.name,
        tr.arrival_s,
        tr.input_tokens,
        tr.output_tokens,
        tr.duration_s,
        cached_tokens=np.array([6000], dtype=np.int64),
    )
    params = ReplicaParams()
    cold = engine.run(tr, Hold(1), params=params, initial_replicas=1).ttft[0]
    warm = engine.run(hit, Hold(1), params=params, initial_replicas=1).ttft[0]
    assert cold == pytest.approx(params.prefill_s(8000.0), rel=0.01)
    assert warm == pytest.approx(params.prefill_s(2000.0), rel=0.01)
