"""Which replica count the reconcile pass applies to the child Deployment.

The operator owns the Deployment's `replicas` and never writes the user's
`spec.replicas`. In Predictive mode the scaling loop is the only writer of the number:
the reconcile pass keeps what runs (clamped to the bounds) and uses the autoscaler's last
decision (kept in status) only to create a missing Deployment. In External mode
`spec.replicas` (the `/scale` subresource) decides; RecommendOnly keeps what runs."""

from __future__ import annotations

from dataclasses import dataclass

from modelscale.api.v1alpha1 import ModelDeploymentSpec


@dataclass(frozen=True)
class ReplicaChoice:
    replicas: int
    source: str  # CamelCase: where the number came from, for logs and status


def clamp(value: int, spec: ModelDeploymentSpec) -> int:
    return max(spec.min_replicas, min(spec.max_replicas, value))


def choose(
    spec: ModelDeploymentSpec, *, status_desired: int | None, running: int | None
) -> ReplicaChoice:
    mode = spec.scaling.mode
    if mode == "External":
        if spec.replicas is not None:
            return ReplicaChoice(spec.replicas, "SpecReplicas")
        return ReplicaChoice(clamp(running if running is not None else 0, spec), "Running")
    if running is not None:
        return ReplicaChoice(clamp(running, spec), "Running")
    if mode == "Predictive" and status_desired is not None:
        return ReplicaChoice(clamp(status_desired, spec), "Autoscaler")
    if mode == "RecommendOnly" and spec.replicas is not None:
        return ReplicaChoice(spec.replicas, "SpecReplicas")
    return ReplicaChoice(spec.min_replicas, "MinReplicas")
