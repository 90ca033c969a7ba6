"""A silence between bursts (azure-code: 2-2.5 minutes, just over one start-up) keeps the
replicas; only one that lasts `IDLE_HORIZONS` horizons counts as no demand."""

from __future__ import annotations

from dataclasses import replace

from fixed_policy import FIXED_CAPACITY, T0, observation

from modelscale.autoscaling import recommender
from modelscale.autoscaling.types import Observation, PolicyConfig, ScalingState

HORIZON = FIXED_CAPACITY.default_horizon_seconds  # 120 s
# The learning policy with the API's 500 tok/s prior and its 240 s scale-down window.
CONFIG = replace(FIXED_CAPACITY, adaptive=True, max_replicas=50, target_tokens_per_replica=500.0)
CONFIG = replace(CONFIG, scale_down_stabilization_seconds=240.0)


def obs(now: float, *, rate: float, replicas: int) -> Observation:
    return observation(now, rate=rate, replicas=replicas, age=1.0, prompt=rate * 4.0)


def _silence(seconds: float, config: PolicyConfig = CONFIG) -> tuple[int, int, str]:
    """Busy 4 replicas for 20 minutes, then `seconds` with nothing served (the rate window's
    60 s included, as the 1-minute rate reads it). (replicas before, after, last reason)."""
    st = ScalingState()
    t = T0
    replicas = 4
    for _ in range(80):
        rec, st = recommender.recommend(
            obs(t, rate=1800.0, replicas=replicas), config=CONFIG, state=st
        )
        replicas = rec.replicas
        t += 15.0
    before = replicas
    for _ in range(int((seconds - 60.0) // 15.0) + 1):
        rec, st = recommender.recommend(
            obs(t, rate=0.0, replicas=replicas), config=CONFIG, state=st
        )
        replicas = rec.replicas
        t += 15.0
    return before, replicas, rec.reason


def test_a_silence_longer_than_one_horizon_but_shorter_than_two_keeps_the_replicas() -> None:
    # 150 s of silence: more than the 120 s horizon, less than two.
    before, after, reason = _silence(1.25 * HORIZON)
    assert before > 1
    assert after > 1, "a burst after 2.5 minutes of silence would meet minReplicas"
    assert reason != recommender.MIN_REPLICAS


def test_a_silence_of_two_horizons_is_no_demand() -> None:
    before, after, reason = _silence(recommender.IDLE_HORIZONS * HORIZON)
    assert before > 1
    assert after == CONFIG.min_replicas
    assert reason == recommender.MIN_REPLICAS


def test_a_silence_is_not_scaled_down_one_replica_at_a_time() -> None:
    """With a 30 s scale-down window the forecast's decaying level would take the fleet
    down one replica per pass during the silence (azure-code: 6 -> 1 in a 3-minute one,
    and the next burst met one replica); it is held until the silence counts as none."""
    short_window = replace(CONFIG, scale_down_stabilization_seconds=30.0)
    before, after, reason = _silence(recommender.IDLE_HORIZONS * HORIZON - 15.0, short_window)
    assert after == before > 1
    assert reason == recommender.SCALE_DOWN_STABILIZING
    _, after, _ = _silence(recommender.IDLE_HORIZONS * HORIZON, short_window)
    assert after == CONFIG.min_replicas
