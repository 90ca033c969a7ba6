"""modelscale's own policy in the simulator: the operator's `autoscaling.recommender`,
called through the same contract (`autoscaling/types.py`) every 15 s of simulated time,
fed what the operator would observe through Prometheus."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from modelscale.autoscaling import recommender
from modelscale.autoscaling.types import Observation, PolicyConfig, Recommendation, ScalingState
from modelscale.simulate.engine import RATE_WINDOW_S, View
from modelscale.simulate.replica import ReplicaParams, Slo

RecommendFn = Callable[..., tuple[Recommendation, ScalingState]]


def prompt_token_rate(view: View, *, window_s: float = RATE_WINDOW_S) -> float:
    """Prompt tokens/s over the window ending at the newest scrape, as
    rate(vllm:prompt_tokens_total[1m]) shows it (the engine's View computes it)."""
    return view.prompt_token_rate(window_s=window_s)


class Modelscale:
    """Our policy: the operator's recommender, gated warm-up (no traffic before warm)."""

    interval_s = 15.0
    warmup_gate = True

    def __init__(
        self,
        *,
        config: PolicyConfig,
        params: ReplicaParams,
        recommend: RecommendFn | None = None,
    ) -> None:
        self.name = "modelscale"
        if config.tpot_slo_seconds is None:
            # The simulator's TPOT SLO, which the suite does not pass in PolicyConfig yet.
            config = replace(config, tpot_slo_seconds=Slo().tpot_s)
        self.config = config
        self.params = params
        # Injectable for tests; by default the operator's own recommender.
        self._recommend = recommend if recommend is not None else recommender.recommend
        self.state = ScalingState()
        self.last: Recommendation | None = None

    def observe(self, view: View) -> Observation:
        return Observation(
            p99_tpot_seconds=view.p99(signal="tpot"),
            prompt_token_rate=prompt_token_rate(view),
            now=view.now,
            token_rate=view.token_rate(),
            p99_seconds=view.p99(signal="ttft"),
            queue_depth=float(view.queue_depth),
            sample_time=view.sample_time,
            warmed_replicas=view.warmed,
            current_replicas=view.created,
            measured_horizon_seconds=view.observed_horizon(),
            request_rate=view.request_rate(),
        )

    def decide(self, view: View) -> int:
        rec, self.state = self._recommend(self.observe(view), config=self.config, state=self.state)
        self.last = rec
        return rec.replicas
