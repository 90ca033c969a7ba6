"""From a ModelDeployment to the policy's inputs, and from its recommendation to what the
operator writes. Pure: the scaling loop in handlers/ does the I/O around it."""

from __future__ import annotations

import json
from collections.abc import Sequence

from modelscale.api.v1alpha1 import (
    AutoscalingStatus,
    Condition,
    ModelDeployment,
    ModelDeploymentSpec,
    ModelDeploymentStatus,
    ScalingDecision,
    from_rfc3339,
    to_rfc3339,
)
from modelscale.autoscaling.types import Observation, PolicyConfig, Recommendation, ScalingState
from modelscale.control import conditions
from modelscale.control.conditions import condition
from modelscale.metrics.promql import Signals
from modelscale.podfacts import PodFacts

# Reasons for the ScalingActive condition.
SCALING_ACTIVE = "Active"
SCALING_RECOMMEND_ONLY = "RecommendOnly"
SCALING_EXTERNAL = "External"
METRICS_UNAVAILABLE = "MetricsUnavailable"
METRIC_REASONS = frozenset({"MetricsMissing", "MetricsStale"})


def policy_config(spec: ModelDeploymentSpec, *, pass_interval_seconds: float = 0.0) -> PolicyConfig:
    """The policy's settings from the spec; `pass_interval_seconds`: the operator's scaling
    interval (the stabilisation windows' per-call semantics, `PolicyConfig`)."""
    s = spec.scaling
    missing = s.on_missing_metrics
    return PolicyConfig(
        min_replicas=spec.min_replicas,
        max_replicas=spec.max_replicas,
        target_tokens_per_replica=s.targets.tokens_per_second_per_replica,
        latency_slo_seconds=s.targets.latency_slo.p99_seconds,
        headroom=s.targets.headroom,
        default_horizon_seconds=s.forecast.horizon_seconds,
        scale_up_stabilization_seconds=s.scale_up.stabilization_window_seconds,
        scale_down_stabilization_seconds=s.scale_down.stabilization_window_seconds,
        max_scale_up_step=s.scale_up.max_step,
        max_scale_down_step=s.scale_down.max_step,
        on_missing_metrics=missing.behavior,
        floor_replicas=missing.floor_replicas if missing.floor_replicas is not None else 0,
        stale_after_seconds=missing.stale_after_seconds,
        seasonality=s.forecast.seasonality,
        tpot_slo_seconds=s.targets.time_per_output_token_p99_seconds,
        ttft_slo_per_1k_prompt_seconds=s.targets.latency_slo.per_thousand_prompt_tokens_seconds,
        pass_interval_seconds=pass_interval_seconds,
    )


def observation(
    md: ModelDeployment,
    *,
    signals: Signals,
    pods: Sequence[PodFacts],
    current_replicas: int,
    measured_horizon: float | None,
    now: float,
    tpot_p99: float | None = None,
) -> Observation:
    live = [p for p in pods if not p.deleting]
    use_measured = md.spec.scaling.forecast.use_measured_horizon
    return Observation(
        now=now,
        token_rate=signals.token_rate,
        p99_seconds=signals.p99_seconds,
        queue_depth=signals.queue_depth,
        sample_time=signals.sample_time,
        # Prefill is load too: long prompts cost capacity the output rate does not show.
        prompt_token_rate=signals.prompt_token_rate,
        request_rate=signals.request_rate,
        p99_tpot_seconds=tpot_p99,
        # Only warmed, Ready pods are capacity: a pod still loading serves nothing.
        warmed_replicas=sum(p.ready and p.warmed for p in live),
        current_replicas=current_replicas,
        measured_horizon_seconds=measured_horizon if use_measured else None,
    )


def previous_state(md: ModelDeployment) -> ScalingState:
    """The policy's state from status: `learnedState` (JSON text) plus the decisions kept
    once in `decisions`; the older nested `state` map when that is all there is."""
    auto = md.status.autoscaling if md.status else None
    if auto is None:
        return ScalingState()
    if not auto.learned_state:
        return ScalingState.from_dict(auto.state)
    try:
        data = json.loads(auto.learned_state)
    except ValueError:
        return ScalingState()  # edited into nonsense: start afresh, as from_dict does
    if not isinstance(data, dict):
        return ScalingState()
    data["decisions"] = [
        {"time": from_rfc3339(d.time), "replicas": d.replicas, "reason": d.reason}
        for d in auto.decisions
    ]
    return ScalingState.from_dict(data)


def learned_state(state: ScalingState) -> str:
    """`state` without the decisions (status shows them once, in `decisions`), as compact
    JSON text for `status.autoscaling.learnedState`."""
    data = {k: v for k, v in state.to_dict().items() if k != "decisions"}
    return json.dumps(data, separators=(",", ":"), allow_nan=False)


def should_actuate(md: ModelDeployment, rec: Recommendation, *, current: int) -> bool:
    return md.spec.scaling.mode == "Predictive" and rec.replicas != current


def scaling_condition(md: ModelDeployment, rec: Recommendation) -> Condition:
    mode = md.spec.scaling.mode
    if rec.reason in METRIC_REASONS:
        return condition(
            conditions.SCALING_ACTIVE, "False", METRICS_UNAVAILABLE, f"{rec.reason}: {rec.message}"
        )
    if mode == "RecommendOnly":
        return condition(
            conditions.SCALING_ACTIVE,
            "False",
            SCALING_RECOMMEND_ONLY,
            f"recommending {rec.replicas} replicas without acting ({rec.reason})",
        )
    if mode == "External":
        return condition(
            conditions.SCALING_ACTIVE,
            "False",
            SCALING_EXTERNAL,
            f"spec.replicas decides (/scale: KEDA, an HPA or kubectl scale); modelscale "
            f"recommends {rec.replicas} ({rec.reason})",
        )
    return condition(conditions.SCALING_ACTIVE, "True", SCALING_ACTIVE, rec.message)


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def status(
    md: ModelDeployment,
    *,
    obs: Observation,
    rec: Recommendation,
    state: ScalingState,
    desired: int | None,
    now: float,
    existing_conditions: Sequence[Condition] | None = None,
) -> ModelDeploymentStatus:
    """The scaling loop's part of status: `autoscaling`, `desiredReplicas` (when acting)
    and the ScalingActive condition, merged into the conditions other writers own."""
    existing = conditions.as_read(md, existing_conditions)
    autoscaling = AutoscalingStatus(
        current_token_rate=_round(obs.token_rate, 1),
        predicted_token_rate=_round(rec.forecast_token_rate, 1),
        current_p99_seconds=_round(obs.p99_seconds),
        predicted_p99_seconds=_round(rec.forecast_p99_seconds),
        horizon_seconds=_round(rec.horizon_seconds, 1),
        recommended_replicas=rec.replicas,
        reason=rec.reason,
        message=rec.message,
        last_scale_time=to_rfc3339(state.last_scale_time) if state.last_scale_time else None,
        decisions=[
            ScalingDecision(time=to_rfc3339(d.time), replicas=d.replicas, reason=d.reason)
            for d in state.decisions[-10:]
        ],
        learned_state=learned_state(state),
        state=None,  # removes the pre-learnedState nested map on upgrade
    )
    merged = conditions.merge(
        existing, [scaling_condition(md, rec)], now=now, generation=md.metadata.generation
    )
    if desired is None:
        return ModelDeploymentStatus(autoscaling=autoscaling, conditions=merged)
    return ModelDeploymentStatus(
        autoscaling=autoscaling, conditions=merged, desired_replicas=desired
    )
