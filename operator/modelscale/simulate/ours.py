"""modelscale's own policy in the simulator: the operator's `autoscaling.recommender`,
called through the same contract (`autoscaling/types.py`) every 15 s of simulated time,
fed what the operator would observe through Prometheus."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from modelscale.autoscaling import recommender
from modelscale.autoscaling.types import Observation, PolicyConfig, Recommendation, ScalingState
from modelscale.simulate.engine import RATE_WINDOW_S, SCRAPE_INTERVAL_S, View
from modelscale.simulate.replica import ReplicaParams, Slo

RecommendFn = Callable[..., tuple[Recommendation, ScalingState]]


def prompt_token_rate(view: View, *, window_s: float = RATE_WINDOW_S) -> float:
    """Prompt tokens/s over the window ending at the newest scrape, as
    rate(vllm:prompt_tokens_total[1m]) shows it: a prompt counts when its prefill ends
    (its first token), like the output-token rate counts tokens as they are produced."""
    e = view._e  # the engine's per-request record, as View.p99 reads it
    s = view.now - SCRAPE_INTERVAL_S
    lo = np.searchsorted(e.trace.arrival_s, s - window_s - 900.0)
    hi = np.searchsorted(e.trace.arrival_s, s, side="right")
    at = e.ftt[lo:hi]
    sel = (at > s - window_s) & (at <= s)
    return float(e.trace.input_tokens[lo:hi][sel].sum() / window_s)


def sample_time(view: View) -> float:
    """Timestamp of the newest scrape: the View's own when the engine provides it."""
    own = getattr(view, "sample_time", None)
    if isinstance(own, int | float):
        return float(own)
    return math.floor((view.now - SCRAPE_INTERVAL_S) / SCRAPE_INTERVAL_S) * SCRAPE_INTERVAL_S


def observed_horizon(view: View) -> float | None:
    """What the operator measures as the horizon: the median creation -> warmed time of
    the replicas seen warm so far; None until one has warmed (the policy then uses its
    configured default). The View's own measurement when the engine provides it."""
    own = getattr(view, "observed_horizon", None)
    if callable(own):
        value = own()
        return None if value is None else float(value)
    e = view._e  # today's engine: the replica table, as the View reads it
    n = e.n_ids
    warm = e.warm_at[:n] <= view.now
    if not warm.any():
        return None
    return float(np.median(e.warm_at[:n][warm] - e.created_at[:n][warm]))


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
            sample_time=sample_time(view),
            warmed_replicas=view.warmed,
            current_replicas=view.created,
            measured_horizon_seconds=observed_horizon(view),
        )

    def decide(self, view: View) -> int:
        rec, self.state = self._recommend(self.observe(view), config=self.config, state=self.state)
        self.last = rec
        return rec.replicas
