"""Which replica count the reconcile pass applies to the child Deployment.

The operator owns the Deployment's `replicas` and never writes the user's
`spec.replicas`: in Predictive mode the autoscaler's last decision (kept in status) wins,
in External mode `spec.replicas` (the `/scale` subresource) does, and RecommendOnly keeps
what is running."""

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
    if mode == "Predictive" and status_desired is not None:
        return ReplicaChoice(clamp(status_desired, spec), "Autoscaler")
    if running is not None:
        return ReplicaChoice(clamp(running, spec), "Running")
    if mode == "RecommendOnly" and spec.replicas is not None:
        return ReplicaChoice(spec.replicas, "SpecReplicas")
    return ReplicaChoice(spec.min_replicas, "MinReplicas")
