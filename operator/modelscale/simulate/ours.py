"""modelscale's own policy in the simulator: the operator's `autoscaling.recommender`,
called through the same contract (`autoscaling/types.py`) every 15 s of simulated time,
fed what the operator would observe through Prometheus."""

from __future__ import annotations

import math
from collections.abc import Callable

from modelscale.autoscaling import recommender
from modelscale.autoscaling.types import Observation, PolicyConfig, Recommendation, ScalingState
from modelscale.simulate.engine import SCRAPE_INTERVAL_S, View
from modelscale.simulate.replica import ReplicaParams

RecommendFn = Callable[..., tuple[Recommendation, ScalingState]]


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
        self.config = config
        self.params = params
        # Injectable for tests; by default the operator's own recommender.
        self._recommend = recommend if recommend is not None else recommender.recommend
        self.state = ScalingState()
        self.last: Recommendation | None = None

    def observe(self, view: View) -> Observation:
        return Observation(
            now=view.now,
            token_rate=view.token_rate(),
            p99_seconds=view.p99(signal="ttft"),
            queue_depth=float(view.queue_depth),
            sample_time=math.floor((view.now - SCRAPE_INTERVAL_S) / SCRAPE_INTERVAL_S)
            * SCRAPE_INTERVAL_S,
            warmed_replicas=view.warmed,
            current_replicas=view.created,
            measured_horizon_seconds=self.params.horizon_s,
        )

    def decide(self, view: View) -> int:
        rec, self.state = self._recommend(self.observe(view), config=self.config, state=self.state)
        self.last = rec
        return rec.replicas
