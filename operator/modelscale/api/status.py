"""The ModelDeployment status models: what the operator observed and decided. Written by
the operator only; unknown fields are ignored (other writers). Re-exported by `v1alpha1`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from modelscale.api.base import _Lenient

ConditionStatus = Literal["True", "False", "Unknown"]


class Condition(_Lenient):
    """A Kubernetes-style condition: Available, Progressing, Degraded, ..."""

    type: str
    status: ConditionStatus
    reason: str = ""
    """CamelCase reason, e.g. `MinimumReplicasWarmed`."""
    message: str = ""
    last_transition_time: str | None = Field(
        default=None, json_schema_extra={"format": "date-time"}
    )
    """Changes only when `status` changes."""
    observed_generation: int | None = None


class ScalingDecision(_Lenient):
    """One past autoscaler decision."""

    time: str = Field(json_schema_extra={"format": "date-time"})
    replicas: int
    reason: str


class AutoscalingStatus(_Lenient):
    """What the autoscaler saw, predicted and decided last."""

    current_token_rate: float | None = None
    """Output tokens/s now, summed over the replicas."""
    predicted_token_rate: float | None = None
    """Forecast output tokens/s at `now + horizonSeconds`."""
    current_p99_seconds: float | None = None
    predicted_p99_seconds: float | None = None
    horizon_seconds: float | None = None
    """The horizon in use: measured pod start-up time, or `spec...forecast.horizonSeconds`."""
    recommended_replicas: int | None = None
    """What the policy recommends now (also in RecommendOnly mode)."""
    reason: str | None = None
    message: str | None = None
    last_scale_time: str | None = Field(default=None, json_schema_extra={"format": "date-time"})
    decisions: list[ScalingDecision] = Field(default_factory=list, max_length=10)
    """The last 10 decisions, oldest first."""
    learned_state: str | None = None
    """The policy's learned parameters (forecaster and capacity model) as one line of JSON,
    so a restarted operator continues where it stopped. Owned by the autoscaler; one string
    so `kubectl describe` stays readable."""
    state: dict[str, Any] | None = None
    """Deprecated: the learned parameters as a nested map (before `learnedState`); read on
    upgrade, removed at the next write."""


class WarmUpStatus(_Lenient):
    """Measured pod start-up of this ModelDeployment's recent pods."""

    median_seconds_to_ready: float | None = None
    """Pod creation to Triton ready (scheduling, image pull, model load)."""
    median_seconds_to_warm: float | None = None
    """Pod creation to warmed (ready plus warm-up): the autoscaler's horizon."""
    samples: int = 0


class ModelDeploymentStatus(_Lenient):
    """What the operator observed. Written by the operator only."""

    observed_generation: int | None = None
    replicas: int | None = None
    """Pods of the current Deployment (for the `/scale` subresource)."""
    ready_replicas: int | None = None
    """Pods that are Ready (containers ready and warmed up)."""
    warmed_replicas: int | None = None
    """Pods whose warm-up succeeded."""
    desired_replicas: int | None = None
    """Replicas the operator set on the Deployment."""
    selector: str | None = None
    """Label selector of the pods, as a string (for the `/scale` subresource)."""
    conditions: list[Condition] = Field(
        default_factory=list,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    autoscaling: AutoscalingStatus | None = None
    warm_up: WarmUpStatus | None = None
    kopf: dict[str, Any] = Field(default_factory=dict)
    """Bookkeeping of the kopf framework (handler progress, last handled spec), kept in
    status rather than in annotations so GitOps tools see no drift. Not for users."""
