"""modelscale's own policy in the simulator: the operator's `autoscaling.recommender`,
called through the same contract (`autoscaling/types.py`) every 15 s of simulated time,
fed what the operator would observe through Prometheus."""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import replace

from modelscale.autoscaling.types import Observation, PolicyConfig, Recommendation, ScalingState
from modelscale.simulate.engine import SCRAPE_INTERVAL_S, View
from modelscale.simulate.replica import ReplicaParams

RecommendFn = Callable[..., tuple[Recommendation, ScalingState]]


def resolve_recommender() -> tuple[RecommendFn, bool]:
    """The operator's recommender, or (until it exists) the placeholder; the flag says
    whether the placeholder is in use."""
    try:
        module = importlib.import_module("modelscale.autoscaling.recommender")
    except ModuleNotFoundError as err:
        if err.name != "modelscale.autoscaling.recommender":
            raise
        return placeholder_recommend, True
    fn: RecommendFn = module.recommend
    return fn, False


def placeholder_recommend(
    obs: Observation, *, config: PolicyConfig, state: ScalingState
) -> tuple[Recommendation, ScalingState]:
    """Stand-in used only while `autoscaling/recommender.py` does not exist: a linear
    trend over the last two observations extrapolated to the horizon, sized with headroom,
    scale-down after the stabilisation window one step at a time."""
    if obs.token_rate is None:
        return Recommendation(obs.current_replicas, "MetricsMissing", "placeholder"), state
    prev = state.model.get("prev")
    horizon = obs.measured_horizon_seconds or config.default_horizon_seconds
    slope = 0.0
    if prev is not None and obs.now > prev[0]:
        slope = max(0.0, (obs.token_rate - prev[1]) / (obs.now - prev[0]))
    forecast = obs.token_rate + slope * horizon
    want = math.ceil(forecast / (config.target_tokens_per_replica * config.headroom))
    want = max(config.min_replicas, min(config.max_replicas, want))
    history = [*state.model.get("history", []), (obs.now, want)]
    history = [(t, r) for t, r in history if t > obs.now - config.scale_down_stabilization_seconds]
    current = obs.current_replicas
    if want < current:
        want = max(want, *(r for _, r in history), current - config.max_scale_down_step)
        want = min(want, current)
    new_state = replace(state, model={"prev": (obs.now, obs.token_rate), "history": history})
    rec = Recommendation(want, "ForecastTokenRate", "placeholder", forecast, None, horizon)
    return rec, new_state


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
        if recommend is None:
            recommend, self.placeholder = resolve_recommender()
        else:
            self.placeholder = False
        self._recommend = recommend
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
