"""The status a reconcile pass writes, computed at once from what it observed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from modelscale.api.v1alpha1 import ModelDeployment
from modelscale.control import conditions
from modelscale.control.conditions import Condition
from modelscale.control.pods import PodFacts
from modelscale.resources import names
from modelscale.warmup import plan as warmup_plan

# Reasons (CamelCase) for the conditions this pass owns.
MINIMUM_REPLICAS_READY = "MinimumReplicasReady"
MINIMUM_REPLICAS_UNAVAILABLE = "MinimumReplicasUnavailable"
SCALED_TO_ZERO = "ScaledToZero"
WARMING_UP = "WarmingUp"
STARTING = "ReplicasStarting"
TERMINATING = "ReplicasTerminating"
STABLE = "Stable"
AS_EXPECTED = "AsExpected"
UNSCHEDULABLE = "Unschedulable"
CONTAINERS_FAILING = "ContainersFailing"
WARM_UP_FAILING = "WarmUpFailing"
APPLY_FAILED = "ApplyFailed"
INVALID_SPEC = "InvalidSpec"


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _degraded(pods: Sequence[PodFacts], apply_error: str | None) -> Condition:
    if apply_error:
        return Condition(conditions.DEGRADED, "True", APPLY_FAILED, apply_error)
    if stuck := [p for p in pods if p.stuck_message]:
        return Condition(
            conditions.DEGRADED,
            "True",
            CONTAINERS_FAILING,
            f"{len(stuck)} pod(s) cannot start: {stuck[0].name}: {stuck[0].stuck_message}",
        )
    if pending := [p for p in pods if p.unschedulable_message]:
        return Condition(
            conditions.DEGRADED,
            "True",
            UNSCHEDULABLE,
            f"{len(pending)} pod(s) cannot be scheduled: {pending[0].unschedulable_message}",
        )
    if failing := [p for p in pods if p.warmup_failure]:
        return Condition(
            conditions.DEGRADED,
            "True",
            WARM_UP_FAILING,
            f"{len(failing)} pod(s) failing warm-up: "
            f"{failing[0].name}: {failing[0].warmup_failure}",
        )
    return Condition(conditions.DEGRADED, "False", AS_EXPECTED, "no problems seen")


def compute(
    md: ModelDeployment,
    *,
    desired: int,
    deployment_status: dict[str, Any] | None,
    pods: Sequence[dict[str, Any]],
    pod_facts: Sequence[PodFacts],
    apply_error: str | None,
    now: float,
    existing_conditions: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The status patch of one reconcile pass (all fields this pass owns, written once).
    `existing_conditions`: the conditions as last read (default: from `md`)."""
    live = [p for p in pod_facts if not p.terminating]
    ready = sum(p.ready for p in live)
    warmed = sum(p.warmed for p in live)
    containers_ready = sum(p.containers_ready for p in live)
    terminating = len(pod_facts) - len(live)
    dep = deployment_status or {}
    replicas = int(dep.get("replicas") or len(live))
    minimum = min(desired, max(md.spec.min_replicas, 1))

    if desired == 0 and not live:
        available = Condition(conditions.AVAILABLE, "True", SCALED_TO_ZERO, "scaled to zero")
    elif ready >= max(minimum, 1):
        available = Condition(
            conditions.AVAILABLE,
            "True",
            MINIMUM_REPLICAS_READY,
            f"{ready} of {desired} replicas ready and warmed",
        )
    else:
        available = Condition(
            conditions.AVAILABLE,
            "False",
            MINIMUM_REPLICAS_UNAVAILABLE,
            f"{ready} of {desired} replicas ready and warmed; at least {max(minimum, 1)} needed",
        )

    if len(live) < desired or ready < desired:
        if containers_ready > warmed:
            progressing = Condition(
                conditions.PROGRESSING,
                "True",
                WARMING_UP,
                f"{containers_ready - warmed} pod(s) warming up, {ready} of {desired} ready",
            )
        else:
            progressing = Condition(
                conditions.PROGRESSING,
                "True",
                STARTING,
                f"{ready} of {desired} replicas ready; pods are starting",
            )
    elif len(live) > desired or terminating:
        progressing = Condition(
            conditions.PROGRESSING, "True", TERMINATING, f"scaling down to {desired} replicas"
        )
    else:
        progressing = Condition(
            conditions.PROGRESSING, "False", STABLE, f"{desired} replicas ready and warmed"
        )

    existing = (
        existing_conditions
        if existing_conditions is not None
        else [
            dict(c)
            for c in (md.status.model_dump(by_alias=True)["conditions"] if md.status else [])
        ]
    )
    status: dict[str, Any] = {
        "observedGeneration": md.metadata.generation,
        "replicas": replicas,
        "readyReplicas": ready,
        "warmedReplicas": warmed,
        "desiredReplicas": desired,
        "selector": names.selector_string(md),
        "conditions": conditions.merge(
            existing,
            [available, progressing, _degraded(live, apply_error)],
            now=now,
            generation=md.metadata.generation,
        ),
    }
    stats = warmup_plan.warmup_stats_for(md_namespace=md.namespace, md_name=md.name, pods=pods)
    if stats.samples_ready or stats.samples_warm:
        status["warmUp"] = {
            "medianSecondsToReady": _round(stats.median_seconds_to_ready),
            "medianSecondsToWarm": _round(stats.median_seconds_to_warm),
            "samples": stats.samples_warm,
        }
    return status


def invalid_spec(
    existing: list[dict[str, Any]], *, message: str, generation: int | None, now: float
) -> dict[str, Any]:
    """Status of a ModelDeployment whose spec could not be parsed (it slipped past the
    schema, e.g. written before the CRD was upgraded): Degraded, with what to fix."""
    return {
        "observedGeneration": generation,
        "conditions": conditions.merge(
            existing,
            [Condition(conditions.DEGRADED, "True", INVALID_SPEC, message)],
            now=now,
            generation=generation,
        ),
    }
