"""The lower bound, the SLO feasibility check and window scoring, on random small cases."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sim_trace import make_trace

from modelscale.autoscaling.types import PolicyConfig
from modelscale.simulate import baselines, bound, engine, figures, oracle, ours, suite
from modelscale.simulate.replica import ReplicaParams, Slo
from modelscale.simulate.trace import Trace

PARAMS = ReplicaParams(startup_s=40.0, warmup_s=10.0)


def random_trace(seed: int, *, minutes: int, rate: float, burst: float, long_in: int) -> Trace:
    """Poisson minutes with a random rate profile; `burst` packs each minute's arrivals
    into its first part; prompts up to `long_in` tokens."""
    rng = np.random.default_rng(seed)
    parts = []
    for m in range(minutes):
        r = rate * rng.uniform(0.3, 1.7)
        k = int(rng.poisson(r * 60))
        parts.append(m * 60 + rng.uniform(0, 60 * (1 - burst) + 1, k).clip(0, 59.99))
    arrivals = np.sort(np.concatenate(parts))
    n = arrivals.size
    return make_trace(
        "random",
        arrivals,
        inp=rng.integers(50, long_in, n),
        out=rng.integers(1, 300, n),
        duration_s=60.0 * minutes,
    )


def runs_of(tr: Trace, slo: Slo) -> list[engine.RunResult]:
    """A spread of schedules: constant counts, gated and ungated peers, ours."""
    out = []
    for k in (1, 2, 3, 4, 5, 6, 8, 11, 15):
        out.append(
            engine.run(
                tr, baselines.StaticPeak(replicas=k), params=PARAMS, initial_replicas=k, dt=1.0
            )
        )
    for gate in (True, False):
        hpa = baselines.Hpa(target_per_pod=400.0)
        policy = suite.Gated(hpa) if gate else hpa
        out.append(engine.run(tr, policy, params=PARAMS, initial_replicas=1, dt=1.0))
    config = PolicyConfig(
        min_replicas=1,
        max_replicas=64,
        target_tokens_per_replica=300.0,
        latency_slo_seconds=slo.ttft_s,
        tpot_slo_seconds=slo.tpot_s,
    )
    others: list[engine.Policy] = [
        ours.Modelscale(config=config, params=PARAMS),
        baselines.KnativeKpa(target_concurrency=8.0),
        baselines.AibrixApa(target_per_pod=400.0),
    ]
    for other in others:
        out.append(engine.run(tr, other, params=PARAMS, initial_replicas=2, dt=1.0))
    return out


@settings(
    max_examples=10,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    seed=st.integers(0, 10_000),
    minutes=st.integers(3, 6),
    rate=st.floats(0.5, 12.0),
    burst=st.floats(0.0, 0.9),
    long_in=st.sampled_from([800, 3000, 9000]),
    per_1k=st.sampled_from([0.0, 0.5]),
)
def test_bound_is_below_every_run_that_meets_the_target(
    *, seed: int, minutes: int, rate: float, burst: float, long_in: int, per_1k: float
) -> None:
    tr = random_trace(seed, minutes=minutes, rate=rate, burst=burst, long_in=long_in)
    slo = Slo(ttft_s=1.0, ttft_per_1k_input_s=per_1k)
    lb = bound.lower_bound(tr, params=PARAMS, slo=slo)
    # Never below the one replica that always exists, never above what it can prove.
    assert lb.replica_seconds >= tr.duration_s - 1e-6
    feasible = bound.feasibility(tr, params=PARAMS, slo=slo)
    results = runs_of(tr, slo)
    if feasible.feasible:
        solved = oracle.solve(tr, params=PARAMS, slo=slo, dt=1.0, skip=feasible.unattainable)
        results.append(solved.result)
    for result in results:
        scores = figures.window_scores(tr, result, slo)
        if not feasible.feasible:
            # The check is a proof: no run attains an unattainable SLO.
            assert scores.attainment < figures.TARGET_WINDOWS or scores.scored.sum() == 0
        elif scores.attainment >= figures.TARGET_WINDOWS:
            assert lb.replica_seconds <= result.replica_seconds + 1e-6


def test_bound_grows_with_load_and_leaves_out_only_the_allowed_windows() -> None:
    light = random_trace(1, minutes=200, rate=2.0, burst=0.0, long_in=3000)
    heavy = random_trace(1, minutes=200, rate=20.0, burst=0.0, long_in=3000)
    lb_light = bound.lower_bound(light, params=PARAMS, slo=Slo())
    lb_heavy = bound.lower_bound(heavy, params=PARAMS, slo=Slo())
    assert lb_heavy.replica_seconds > 2 * lb_light.replica_seconds
    assert lb_heavy.windows_left_out == figures.allowed_failed_windows(200) == 2


@pytest.mark.parametrize(
    ("n", "misses"),
    [(1, 0), (20, 0), (100, 0), (101, 1), (200, 1), (201, 2), (1000, 9)],
)
def test_allowed_misses_match_the_p99_used_for_scoring(n: int, misses: int) -> None:
    assert figures.allowed_misses(n) == misses
    values = np.zeros(n)
    values[:misses] = np.inf  # the misses the P99 tolerates
    assert figures.p99(values) == 0.0
    values[misses] = np.inf  # one more and it fails
    assert figures.p99(values) == np.inf


def test_sparse_and_empty_windows_are_not_scored_as_met() -> None:
    # Minute 0 busy, minute 1 empty (a gap in the data), minute 2 has 5 requests.
    arrivals = np.concatenate([np.linspace(0, 59, 100), np.linspace(121, 130, 5)])
    tr = make_trace("gap", arrivals, inp=200, out=20, duration_s=180.0)
    result = engine.run(
        tr, baselines.StaticPeak(replicas=2), params=PARAMS, initial_replicas=2, dt=1.0
    )
    scores = figures.window_scores(tr, result, Slo())
    assert scores.counts.tolist() == [100, 0, 5]
    assert scores.scored.tolist() == [True, False, False]
    assert scores.met.tolist() == [True, False, False]
    f = figures.compute(tr, result, Slo(), oracle_replica_seconds=None)
    assert (f.windows_scored, f.windows_unscored, f.slo_attainment_windows) == (1, 2, 1.0)


def test_length_aware_target_is_the_slos_own_definition() -> None:
    slo = Slo(ttft_s=2.0, ttft_per_1k_input_s=0.5)
    targets = figures.ttft_targets(slo, np.array([0, 1000, 16000]))
    assert targets.tolist() == [2.0, 2.5, 10.0]
    assert targets[2] == slo.ttft_target(16000)


def test_oracle_and_start_stay_finite_when_one_replica_cannot_serve_a_window() -> None:
    # Minute 1's prompts take 5 s to prefill: no replica count meets a 2 s TTFT there.
    arrivals = np.concatenate([np.linspace(0, 59, 60), np.linspace(60, 119, 60)])
    inputs = np.concatenate([np.full(60, 300), np.full(60, 40_000)])
    tr = make_trace("long", arrivals, inp=inputs, out=30, duration_s=120.0)
    need = bound.fluid_replicas(tr, params=PARAMS, slo=Slo(), max_replicas=256)
    assert need.tolist() == [1, 1]
    feas = bound.feasibility(tr, params=PARAMS, slo=Slo())
    assert not feas.feasible and feas.unattainable.tolist() == [False, True]
    assert "exceeds their TTFT target" in feas.reason
    with pytest.raises(bound.InfeasibleCapacityError, match="cannot serve the mean request"):
        bound.initial_replicas(tr, params=PARAMS, slo=Slo(), max_replicas=256)
