"""modelscale's policy in the simulator: the operator's recommender, fed what the operator
would observe."""

from __future__ import annotations

from typing import Any

import numpy as np
from sim_trace import make_trace

from modelscale.autoscaling import recommender
from modelscale.autoscaling.types import Observation, Recommendation, ScalingState
from modelscale.simulate import engine, ours, suite
from modelscale.simulate.replica import ReplicaParams
from modelscale.simulate.trace import Trace


def steady(rate: float, duration: float) -> Trace:
    rng = np.random.default_rng(1)
    n = int(rate * duration)
    return make_trace(
        "steady", np.sort(rng.uniform(0, duration, n)), inp=500, out=100, duration_s=duration
    )


def test_default_policy_is_the_operators_recommender() -> None:
    setup = suite.prepare(steady(1.0, 300))
    policy = suite.make_policy("modelscale", setup)
    assert isinstance(policy, ours.Modelscale)
    assert policy._recommend is recommender.recommend
    assert policy.warmup_gate and policy.interval_s == 15.0


def spy_on_recommend() -> tuple[list[Observation], ours.RecommendFn]:
    """The real recommender, recording every observation the policy hands it."""
    seen: list[Observation] = []

    def spy(
        obs: Observation, *, config: Any, state: ScalingState
    ) -> tuple[Recommendation, ScalingState]:
        seen.append(obs)
        return recommender.recommend(obs, config=config, state=state)

    return seen, spy


def test_observations_are_what_the_operator_would_see() -> None:
    seen, spy = spy_on_recommend()

    tr = steady(3.0, 600)  # 300 output tok/s offered
    setup = suite.prepare(tr, recommend=spy)
    engine.run(
        tr, suite.make_policy("modelscale", setup), params=ReplicaParams(), initial_replicas=2
    )
    times = [o.now for o in seen]
    assert times[0] == 60.0 and set(np.diff(times)) == {15.0}
    for obs in seen:
        # No replica was created during the replay, so none was measured: the policy uses
        # its configured default horizon, as the operator does before its first new pod.
        assert obs.measured_horizon_seconds is None
        # The newest 15 s scrape: up to one scrape interval old.
        assert obs.sample_time is not None and obs.now - 15.0 <= obs.sample_time <= obs.now
        assert 0 < obs.warmed_replicas <= obs.current_replicas
        assert obs.queue_depth is not None and obs.queue_depth >= 0
    steady_rates = [o.token_rate for o in seen if 120 <= o.now <= 540]
    assert all(r is not None and abs(r - 300) < 45 for r in steady_rates)
    # Requests/s and prompt tokens/s, as rate(..._count[1m]) and rate(prompt_tokens[1m])
    # show them: 3 req/s of 500-token prompts, the mean prompt the length-aware SLO uses.
    mid = [o for o in seen if 120 <= o.now <= 540]
    assert all(o.request_rate is not None and abs(o.request_rate - 3.0) < 0.6 for o in mid)
    prompts = [o.prompt_token_rate / o.request_rate for o in mid]  # type: ignore[operator]
    assert all(abs(p - 500.0) < 1.0 for p in prompts)
    # The benchmark's SLO reaches the policy with its per-1k-token allowance.
    config = suite.make_policy("modelscale", setup).config  # type: ignore[attr-defined]
    assert config.ttft_slo_per_1k_prompt_seconds == suite.DEFAULT_SLO.ttft_per_1k_input_s
    assert all(o.p99_seconds is not None and o.p99_seconds < 2.0 for o in seen)


def test_horizon_is_what_the_operator_would_measure() -> None:
    """None until a replica created during the replay has warmed (the policy then uses its
    configured default), then the median creation -> warmed time of those replicas: drawn
    start-up times, not the constant L + W."""
    seen, spy = spy_on_recommend()

    quiet, busy = steady(0.5, 300), steady(12.0, 900)
    tr = Trace(
        name="step",
        arrival_s=np.concatenate([quiet.arrival_s, busy.arrival_s + 300.0]),
        input_tokens=np.concatenate([quiet.input_tokens, busy.input_tokens]),
        output_tokens=np.concatenate([quiet.output_tokens, busy.output_tokens]),
        duration_s=1200.0,
    )
    params = ReplicaParams()
    setup = suite.prepare(tr, params=params, recommend=spy)
    engine.run(tr, suite.make_policy("modelscale", setup), params=params, initial_replicas=1)
    horizons = [o.measured_horizon_seconds for o in seen]
    assert horizons[0] is None
    measured = [h for h in horizons if h is not None]
    assert measured, "the step made the policy add replicas, and they warmed"
    low, high = params.startup_bounds()
    assert all(low + params.warmup_s <= h <= high + params.warmup_s for h in measured)


def test_a_sweep_point_moves_where_ours_runs_after_it_has_learned_the_capacity() -> None:
    """The sweep's `scale` multiplies the load per replica each policy plans for. For ours
    that is the learned capacity once the pods' metrics have located it, not only the
    prior: with the prior alone scaled, ours at x0.5 ran a steady load on as many replicas
    as at x1.0 within minutes (3) and its sweep could not buy windows with replicas."""
    rng = np.random.default_rng(1)
    duration = 1200.0
    arrivals = np.sort(rng.uniform(0, duration, int(20.0 * duration)))
    tr = make_trace("steady", arrivals, inp=500, out=100, duration_s=duration)
    setup = suite.prepare(tr)
    runs = {
        s: suite.run_policy(setup, suite.make_policy("modelscale", setup, scale=s))
        for s in (0.5, 1.0)
    }
    assert suite.ours_config(setup, scale=0.5).learned_headroom == 0.5
    assert suite.ours_config(setup).learned_headroom == 1.0  # a user's defaults: no sweep
    # Planning for half the load per replica keeps about twice the replicas, to the end.
    assert runs[0.5].replicas[-1] > runs[1.0].replicas[-1]
    assert runs[0.5].replica_seconds >= 1.5 * runs[1.0].replica_seconds
