"""A TTFT SLO that grows with the prompt (`ttft_slo_per_1k_prompt_seconds`): the policy
compares the P99 with the target of the mean request, as the benchmark scores each request
against its own target."""

from __future__ import annotations

from dataclasses import replace

from fixed_policy import T0, observation

from modelscale.autoscaling import demand, recommender
from modelscale.autoscaling.types import Observation, PolicyConfig, ScalingState

CONFIG = PolicyConfig(
    min_replicas=1,
    max_replicas=50,
    target_tokens_per_replica=500.0,
    latency_slo_seconds=2.0,
    ttft_slo_per_1k_prompt_seconds=0.5,
)


def _obs(*, p99: float, prompt: float | None, requests: float | None) -> Observation:
    scrape = observation(T0, rate=900.0, replicas=3, p99=p99, prompt=prompt, age=1.0)
    return replace(scrape, request_rate=requests)


def test_the_target_is_that_of_the_mean_prompt() -> None:
    # 20,000 prompt tokens/s over 5 requests/s: 4,000-token prompts, 2 + 0.5 x 4 = 4 s.
    assert demand.latency_slo(_obs(p99=1.0, prompt=20_000.0, requests=5.0), CONFIG) == 4.0
    # Without a request rate, or without an allowance: the fixed target.
    assert demand.latency_slo(_obs(p99=1.0, prompt=20_000.0, requests=None), CONFIG) == 2.0
    assert demand.latency_slo(_obs(p99=1.0, prompt=20_000.0, requests=0.0), CONFIG) == 2.0
    flat = replace(CONFIG, ttft_slo_per_1k_prompt_seconds=0.0)
    assert demand.latency_slo(_obs(p99=1.0, prompt=20_000.0, requests=5.0), flat) == 2.0


def test_a_p99_within_the_long_prompt_target_is_no_slo_miss() -> None:
    """3 s P99 on 4k-token prompts meets a 2 s + 0.5 s/1k SLO (4 s): no LatencySLO
    scale-up; with the flat 2 s target the same reading is a miss."""
    long_prompts = _obs(p99=3.0, prompt=20_000.0, requests=5.0)
    rec, _ = recommender.recommend(long_prompts, config=CONFIG, state=ScalingState())
    assert rec.reason != recommender.LATENCY_SLO
    flat = replace(CONFIG, ttft_slo_per_1k_prompt_seconds=0.0)
    rec, _ = recommender.recommend(long_prompts, config=flat, state=ScalingState())
    assert rec.reason == recommender.LATENCY_SLO
    # Short prompts get no allowance to speak of: 3 s is over their 2.1 s target.
    short = _obs(p99=3.0, prompt=1_000.0, requests=5.0)
    rec, _ = recommender.recommend(short, config=CONFIG, state=ScalingState())
    assert rec.reason == recommender.LATENCY_SLO
