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


def test_horizon_is_what_the_operator_would_measure() -> None:
    """None until a replica has warmed (the policy then uses its configured default), then
    the median creation -> warmed time of the replicas seen warm, not a constant."""
    tr = steady(1.0, 600)
    e = engine._Engine(
        tr, params=ReplicaParams(), dt=0.5, initial_replicas=0, max_replicas=8, drain_s=0.0
    )
    assert ours.observed_horizon(engine.View(e, 0.0)) is None
    e.scale_to(2, 10.0)
    assert ours.observed_horizon(engine.View(e, 100.0)) is None  # starting, not warm yet
    assert ours.observed_horizon(engine.View(e, 10.0 + 140.0)) == 140.0


def test_the_views_own_sample_time_and_horizon_win_when_the_engine_has_them() -> None:
    class View:
        now = 100.0
        sample_time = 84.0

        def observed_horizon(self) -> float | None:
            return 150.0

    view: Any = View()
    assert ours.sample_time(view) == 84.0
    assert ours.observed_horizon(view) == 150.0
