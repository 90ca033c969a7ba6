"""modelscale's policy in the simulator: the operator's recommender, fed what the operator
would observe."""

from __future__ import annotations

from typing import Any

import numpy as np

from modelscale.autoscaling import recommender
from modelscale.autoscaling.types import Observation, Recommendation, ScalingState
from modelscale.simulate import engine, ours, suite
from modelscale.simulate.replica import ReplicaParams
from modelscale.simulate.trace import Trace


def steady(rate: float, duration: float) -> Trace:
    rng = np.random.default_rng(1)
    n = int(rate * duration)
    return Trace(
        name="steady",
        arrival_s=np.sort(rng.uniform(0, duration, n)),
        input_tokens=np.full(n, 500, dtype=np.int64),
        output_tokens=np.full(n, 100, dtype=np.int64),
        duration_s=duration,
    )


def test_default_policy_is_the_operators_recommender() -> None:
    setup = suite.prepare(steady(1.0, 300))
    policy = suite.make_policy("modelscale", setup)
    assert isinstance(policy, ours.Modelscale)
    assert policy._recommend is recommender.recommend
    assert policy.warmup_gate and policy.interval_s == 15.0


def test_observations_are_what_the_operator_would_see() -> None:
    seen: list[Observation] = []

    def spy(
        obs: Observation, *, config: Any, state: ScalingState
    ) -> tuple[Recommendation, ScalingState]:
        seen.append(obs)
        return recommender.recommend(obs, config=config, state=state)

    tr = steady(3.0, 600)  # 300 output tok/s offered
    setup = suite.prepare(tr, recommend=spy)
    engine.run(
        tr, suite.make_policy("modelscale", setup), params=ReplicaParams(), initial_replicas=2
    )
    times = [o.now for o in seen]
    assert times[0] == 60.0 and set(np.diff(times)) == {15.0}
    for obs in seen:
        assert obs.measured_horizon_seconds == 140.0
        # The newest 15 s scrape: up to one scrape interval old.
        assert obs.sample_time is not None and obs.now - 15.0 <= obs.sample_time <= obs.now
        assert 0 < obs.warmed_replicas <= obs.current_replicas
        assert obs.queue_depth is not None and obs.queue_depth >= 0
    steady_rates = [o.token_rate for o in seen if 120 <= o.now <= 540]
    assert all(r is not None and abs(r - 300) < 45 for r in steady_rates)
    assert all(o.p99_seconds is not None and o.p99_seconds < 2.0 for o in seen)
