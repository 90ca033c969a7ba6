"""What the recommender tests that pin the non-learning mechanisms share: the start time,
the spec-as-given policy and one Observation factory (the spec's capacity is used as it
is; test_policy_learning.py covers the learning policy)."""

from __future__ import annotations

from modelscale.autoscaling.types import Observation, PolicyConfig

T0 = 1_700_438_400.0
FIXED_CAPACITY = PolicyConfig(
    adaptive=False,
    min_replicas=1,
    max_replicas=20,
    target_tokens_per_replica=1000.0,
    latency_slo_seconds=2.0,
    headroom=0.8,
    default_horizon_seconds=120.0,
    scale_down_stabilization_seconds=300.0,
)


def observation(
    now: float,
    *,
    rate: float | None,
    replicas: int,
    warmed: int | None = None,
    p99: float | None = 0.5,
    queue: float | None = 0.0,
    age: float = 5.0,
    horizon: float | None = None,
    tpot: float | None = None,
    prompt: float | None = None,
) -> Observation:
    """A scrape `age` s old of `replicas` pods (all warmed unless `warmed` says otherwise)."""
    return Observation(
        now=now,
        token_rate=rate,
        p99_seconds=p99,
        queue_depth=queue,
        sample_time=now - age,
        warmed_replicas=replicas if warmed is None else warmed,
        current_replicas=replicas,
        measured_horizon_seconds=horizon,
        p99_tpot_seconds=tpot,
        prompt_token_rate=prompt,
    )
