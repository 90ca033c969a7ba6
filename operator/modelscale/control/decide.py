"""The decision for one ModelDeployment in one scaling pass, without I/O: from the spec,
its pods, what Prometheus said and `now` to the policy's recommendation. The scaling loop
acts on it; `modelscale recommend` prints it."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from modelscale.api.v1alpha1 import ModelDeployment
from modelscale.autoscaling import recommender
from modelscale.autoscaling.types import Observation, Recommendation, ScalingState
from modelscale.control import scaling
from modelscale.metrics import promql
from modelscale.metrics.promql import Signals
from modelscale.podfacts import PodFacts
from modelscale.warmup import startup


@dataclass(frozen=True)
class Decision:
    """What the policy recommends, the state it continues from next pass, and what it saw."""

    recommendation: Recommendation
    state: ScalingState
    observation: Observation


def decide(
    md: ModelDeployment,
    *,
    signals: Signals,
    pods: Sequence[PodFacts],
    current: int,
    now: float,
    history: Sequence[tuple[float, float]] = (),
    tpot_p99: float | None = None,
    metrics_error: str | None = None,
    pass_interval_seconds: float = 0.0,
) -> Decision:
    """Run the policy for one ModelDeployment. `history` (token rate over time) seeds a
    forecaster that has learned nothing yet. `metrics_error`: why Prometheus could not be
    queried, told apart from an answer without samples. `pass_interval_seconds`: the time
    between two passes (the stabilisation windows count a value for the window after its
    last pass)."""
    stats = startup.stats_for(md_namespace=md.namespace, md_name=md.name, pods=pods)
    # Pods on a NotReady node serve nothing: the policy decides for the others, and the
    # Deployment gets that many more so their replacements start (and warm up) now.
    lost = [p for p in pods if not p.node_ready and not p.deleting]
    obs = scaling.observation(
        md,
        signals=signals,
        pods=[p for p in pods if p.node_ready],
        current_replicas=current - len(lost),
        measured_horizon=stats.median_seconds_to_warm,
        now=now,
        tpot_p99=tpot_p99,
    )
    # Completeness, for the no-scale-down-on-partial-data checks. An overridden token
    # rate comes from the user's own series: the preset's per-pod count says nothing then.
    overridden = signals.sources.get(promql.TOKEN_RATE) == "override"
    obs = dataclasses.replace(
        obs,
        pods_reporting=None if overridden else signals.pods_reporting,
        metrics_problems=signals.problems,
        # A refused token rate is missing for a reason the user can fix: say which.
        metrics_error=metrics_error or ("; ".join(signals.problems) or None),
    )
    config = scaling.policy_config(md.spec, pass_interval_seconds=pass_interval_seconds)
    state = scaling.previous_state(md)
    if history:
        state = recommender.bootstrap(state, samples=history, config=config)
    rec, state = recommender.recommend(obs, config=config, state=state)
    if lost:
        rec = _replace_lost(rec, lost=lost, max_replicas=config.max_replicas)
    return Decision(recommendation=rec, state=state, observation=obs)


def _replace_lost(
    rec: Recommendation, *, lost: Sequence[PodFacts], max_replicas: int
) -> Recommendation:
    replicas = min(rec.replicas + len(lost), max(max_replicas, rec.replicas))
    names = ", ".join(sorted(f"{p.name} on {p.node}" for p in lost))
    extra = replicas - rec.replicas
    note = f"{len(lost)} pod(s) on NotReady nodes do not count ({names}): " + (
        f"{extra} replica(s) added for them" if extra else "maxReplicas leaves no room"
    )
    return dataclasses.replace(rec, replicas=replicas, message=f"{rec.message}; {note}")
