"""Demand a saturated fleet queues instead of serving (`demand.unserved_work`): the served
token rate of a pod at its limit reads its capacity, and the growth of the queue is the
demand it does not show."""

from __future__ import annotations

from dataclasses import replace

import pytest
from fixed_policy import FIXED_CAPACITY, T0, observation

from modelscale.autoscaling import demand, recommender, state
from modelscale.autoscaling.types import Observation, ScalingState

# The learning policy with the API's 500 tok/s prior and its 240 s scale-down window.
CONFIG = replace(FIXED_CAPACITY, adaptive=True, max_replicas=50, target_tokens_per_replica=500.0)
CONFIG = replace(CONFIG, scale_down_stabilization_seconds=240.0)
MODEL = state.load({}, config=CONFIG)


def obs(
    now: float, *, rate: float, queue: float, replicas: int = 2, p99: float = 0.5
) -> Observation:
    """100 output tokens per served request."""
    scrape = observation(now, rate=rate, replicas=replicas, p99=p99, queue=queue, age=1.0)
    return replace(scrape, request_rate=rate / 100.0)


def test_queue_growth_is_converted_to_tokens_at_the_mean_request() -> None:
    # 30 more waiting requests in 15 s = 2 requests/s not served, 100 tokens each.
    seen = obs(T0, rate=1400.0, queue=40.0)
    got = demand.unserved_work(seen, config=CONFIG, model=MODEL, previous_queue=10.0, gap=15.0)
    assert got == pytest.approx(200.0)


@pytest.mark.parametrize(
    ("queue", "previous", "request_rate"),
    [
        pytest.param(2.0, 0.0, 10.0, id="within-one-waiting-request-per-replica"),
        pytest.param(30.0, 40.0, 10.0, id="queue-shrinking"),
        pytest.param(40.0, None, 10.0, id="no-previous-queue"),
        pytest.param(40.0, 10.0, None, id="no-request-rate"),
        pytest.param(40.0, 10.0, 0.0, id="nothing-served"),
    ],
)
def test_no_unserved_work_without_a_growing_queue_and_a_request_rate(
    queue: float, previous: float | None, request_rate: float | None
) -> None:
    seen = replace(obs(T0, rate=1400.0, queue=queue), request_rate=request_rate)
    got = demand.unserved_work(seen, config=CONFIG, model=MODEL, previous_queue=previous, gap=15.0)
    assert got == 0.0


def _saturate(t: float, st: ScalingState, replicas: int) -> tuple[str, int, int]:
    """Three passes on which the served rate stays at 1,400 tok/s while the queue grows
    by 300 requests per 15 s (20 requests/s more than served), P99 still under the SLO;
    then one with that queue no longer growing. (last message, replicas asked while
    growing, replicas asked once flat)."""
    queue = 0.0
    for _ in range(3):
        queue += 300.0
        rec, st = recommender.recommend(
            obs(t, rate=1400.0, queue=queue, replicas=replicas, p99=1.5), config=CONFIG, state=st
        )
        t += 15.0
    flat, _ = recommender.recommend(
        obs(t, rate=1400.0, queue=queue, replicas=replicas, p99=1.5), config=CONFIG, state=st
    )
    return rec.message, rec.replicas, flat.replicas


def test_a_queue_growing_on_saturated_pods_asks_for_the_demand_it_hides(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    st = ScalingState()
    t = T0
    replicas = 3
    for _ in range(80):  # 20 minutes at 1,400 tok/s at half the SLO: the prior stands
        rec, st = recommender.recommend(
            obs(t, rate=1400.0, queue=0.0, replicas=replicas, p99=1.0), config=CONFIG, state=st
        )
        replicas = rec.replicas
        t += 15.0
    message, growing, flat = _saturate(t, st, replicas)
    assert "queued, not served" in message
    # Without the queue's growth, only the one replica a building queue asks for.
    monkeypatch.setattr(recommender, "unserved_work", lambda *_, **__: 0.0)
    _, blind, _ = _saturate(t, st, replicas)
    assert blind == replicas + 1
    # With it: the arrivals, at most twice the served rate (2,800 tok/s at 500 per pod).
    assert growing == 6 > blind
    assert flat <= growing
