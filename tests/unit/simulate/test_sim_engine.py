"""The replica model and the replay engine, on small synthetic loads."""

from __future__ import annotations

import numpy as np
import pytest

from modelscale.simulate import engine, figures, suite
from modelscale.simulate.engine import View
from modelscale.simulate.replica import ReplicaParams, Slo
from modelscale.simulate.trace import Trace


def poisson(
    rate: float, duration: float, *, inp: int = 200, out: int = 100, seed: int = 0
) -> Trace:
    rng = np.random.default_rng(seed)
    n = int(rng.poisson(rate * duration))
    return Trace(
        name="synthetic",
        arrival_s=np.sort(rng.uniform(0, duration, n)),
        input_tokens=np.full(n, inp, dtype=np.int64),
        output_tokens=np.full(n, out, dtype=np.int64),
        duration_s=duration,
    )


class Fixed:
    """Holds `replicas`, optionally stepping to `then` at `at` seconds."""

    interval_s = 1.0

    def __init__(
        self, replicas: int, *, then: int | None = None, at: float = 0.0, gate: bool = True
    ) -> None:
        self.name = "fixed"
        self.replicas, self.then, self.at = replicas, then, at
        self.warmup_gate = gate

    def decide(self, view: View) -> int:
        if self.then is not None and view.now >= self.at:
            return self.then
        return self.replicas


def median_tpot(rate: float) -> float:
    tr = poisson(rate, 300.0)
    result = engine.run(tr, Fixed(1), params=ReplicaParams(), initial_replicas=1)
    return float(np.median(result.tpot))


def test_inter_token_latency_rises_with_batch() -> None:
    tpots = [median_tpot(rate) for rate in (0.2, 2.0, 6.0)]
    # Single stream ~ alpha = 1/75 s; more concurrent sequences -> slower tokens.
    assert tpots[0] == pytest.approx(1 / 75, rel=0.15)
    assert tpots[0] < tpots[1] < tpots[2]


def test_overload_queues_requests_and_ttft_grows() -> None:
    params = ReplicaParams(max_batch=4)
    light = engine.run(poisson(0.2, 300), Fixed(1), params=params, initial_replicas=1)
    heavy = engine.run(poisson(5.0, 300), Fixed(1), params=params, initial_replicas=1)
    prefill = 200 / params.prefill_tokens_per_s
    assert np.median(light.ttft) == pytest.approx(prefill, abs=0.01)
    assert np.median(heavy.ttft) > 10 * prefill  # waited for a free sequence slot
    assert np.all(np.isfinite(heavy.ttft))  # the drain after the trace serves everyone


@pytest.mark.parametrize(
    ("gate", "first_traffic"),
    [
        pytest.param(True, 60 + 120 + 20, id="gated-serves-after-L+W"),
        pytest.param(False, 60 + 120, id="ungated-serves-after-L"),
    ],
)
def test_new_replica_serves_only_after_startup(gate: bool, first_traffic: float) -> None:
    # One replica saturated (batch 1); a second is created at the first decision (t=60).
    params = ReplicaParams(max_batch=1)
    tr = poisson(3.0, 400, out=20)
    policy = Fixed(1, then=2, at=60.0, gate=gate)
    result = engine.run(tr, policy, params=params, initial_replicas=1)
    t_admit = tr.arrival_s + result.ttft - tr.input_tokens / params.prefill_tokens_per_s
    # Throughput of one replica caps admissions; with two, more requests start per second.
    before = (t_admit < first_traffic - 1).sum() / (first_traffic - 1)
    after = ((t_admit >= first_traffic + 1) & (t_admit < 400)).sum() / (400 - first_traffic - 1)
    assert after > 1.5 * before
    assert bool(result.cold.any()) is (not gate)
    if not gate:
        cold_admits = t_admit[result.cold]
        assert cold_admits.min() >= 60 + 120 - 0.5
        assert cold_admits.max() <= 60 + 140 + 0.5


def test_replica_seconds_count_starting_replicas() -> None:
    tr = poisson(0.1, 600)
    result = engine.run(tr, Fixed(1, then=3, at=100.0), params=ReplicaParams(), initial_replicas=1)
    assert result.replica_seconds == pytest.approx(100 + 3 * 500, abs=2)
    assert result.scale_events == 1


def test_same_seed_same_figures() -> None:
    tr = poisson(4.0, 900, seed=3)

    def figs() -> dict[str, object]:
        setup = suite.prepare(tr)
        return {n: f.to_dict() for n, (_, f) in suite.run_all(setup, ["hpa", "oracle"]).items()}

    assert figs() == figs()


def test_request_and_window_attainment() -> None:
    tr = Trace("t", np.array([0.0, 10.0, 70.0]), np.array([1, 1, 1]), np.array([2, 2, 2]), 120.0)
    result = engine.RunResult(
        policy="x",
        ttft=np.array([0.1, 5.0, 0.1]),
        tpot=np.array([0.01, 0.01, 0.01]),
        cold=np.zeros(3, dtype=bool),
        replica_seconds=240.0,
        scale_events=0,
    )
    f = figures.compute(tr, result, Slo(), oracle_replica_seconds=120.0)
    assert f.slo_attainment_requests == pytest.approx(2 / 3)
    # Windows of fewer than figures.MIN_REQUESTS requests are not scored (never "met"):
    # see tests/unit/simulate/test_sim_bound.py for scored windows.
    assert (f.windows_scored, f.windows_unscored, f.slo_attainment_windows) == (0, 2, 0.0)
    assert f.excess_over_oracle == pytest.approx(1.0)
