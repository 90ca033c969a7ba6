"""The status a reconcile pass writes, computed at once from what it observed."""

from __future__ import annotations

from collections.abc import Sequence

from modelscale.api.v1alpha1 import Condition, ModelDeployment, ModelDeploymentStatus, WarmUpStatus
from modelscale.control import conditions
from modelscale.control.conditions import condition
from modelscale.podfacts import PodFacts
from modelscale.resources import names
from modelscale.warmup import reasons as warm_reasons
from modelscale.warmup import startup

# Reasons (CamelCase) for the conditions this pass owns.
MINIMUM_REPLICAS_READY = "MinimumReplicasReady"
REPLICAS_WARMED = "ReplicasWarmed"
TOO_FEW_WARMED = "TooFewReplicasWarmed"
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


def _invalid_warm_up(pod: PodFacts) -> bool:
    gate = pod.warmed_condition
    return (
        gate is not None and gate.status == "False" and gate.reason == warm_reasons.INVALID_REQUEST
    )


def _problem(pods: Sequence[PodFacts], apply_error: str | None) -> tuple[str, str] | None:
    """(reason, message) of the first problem seen, worst first; None when all is well."""
    if apply_error:
        return APPLY_FAILED, apply_error
    if stuck := [p for p in pods if p.stuck_message]:
        first = f"{stuck[0].name}: {stuck[0].stuck_message}"
        return CONTAINERS_FAILING, f"{len(stuck)} pod(s) cannot start: {first}"
    if pending := [p for p in pods if p.unschedulable_message]:
        why = pending[0].unschedulable_message
        return UNSCHEDULABLE, f"{len(pending)} pod(s) cannot be scheduled: {why}"
    if invalid := [p for p in pods if _invalid_warm_up(p)]:
        # Before WarmUpFailing: no pod will ever pass this warm-up; the spec must change.
        first = f"{invalid[0].name}: {invalid[0].warmup_failure}"
        return warm_reasons.INVALID_REQUEST, f"{len(invalid)} pod(s) cannot be warmed: {first}"
    if failing := [p for p in pods if p.warmup_failure]:
        first = f"{failing[0].name}: {failing[0].warmup_failure}"
        return WARM_UP_FAILING, f"{len(failing)} pod(s) failing warm-up: {first}"
    return None


def _degraded(pods: Sequence[PodFacts], apply_error: str | None) -> Condition:
    problem = _problem(pods, apply_error)
    if problem is None:
        return condition(conditions.DEGRADED, "False", AS_EXPECTED, "no problems seen")
    return condition(conditions.DEGRADED, "True", *problem)


def _ready(*, ready: int, desired: int, min_replicas: int, stable: bool) -> Condition:
    """kstatus' `Ready`: True only when enough pods serve warmed, at least
    max(minReplicas, 1), and (once no rollout or scaling is under way) all `desired`.
    A ModelDeployment scaled to zero serves nothing, so it is not Ready."""
    need = max(min_replicas, 1, desired if stable else 0)
    if ready >= need:
        return condition(
            conditions.READY, "True", REPLICAS_WARMED, f"{ready} of {desired} replicas warmed"
        )
    return condition(
        conditions.READY,
        "False",
        TOO_FEW_WARMED,
        f"{ready} of {desired} replicas warmed; Ready needs at least {need}",
    )


def compute(
    md: ModelDeployment,
    *,
    desired: int,
    pods: Sequence[PodFacts],
    apply_error: str | None,
    now: float,
    existing_conditions: Sequence[Condition] | None = None,
) -> ModelDeploymentStatus:
    """The status of one reconcile pass (all fields this pass owns, written once).
    `existing_conditions`: the conditions as last read (default: from `md`)."""
    live = [p for p in pods if not p.deleting]
    ready = sum(p.ready for p in live)
    warmed = sum(p.warmed for p in live)
    containers_ready = sum(p.containers_ready for p in live)
    terminating = len(pods) - len(live)
    minimum = min(desired, max(md.spec.min_replicas, 1))

    if desired == 0 and not live:
        available = condition(conditions.AVAILABLE, "True", SCALED_TO_ZERO, "scaled to zero")
    elif ready >= max(minimum, 1):
        available = condition(
            conditions.AVAILABLE,
            "True",
            MINIMUM_REPLICAS_READY,
            f"{ready} of {desired} replicas ready and warmed",
        )
    else:
        available = condition(
            conditions.AVAILABLE,
            "False",
            MINIMUM_REPLICAS_UNAVAILABLE,
            f"{ready} of {desired} replicas ready and warmed; at least {max(minimum, 1)} needed",
        )

    if len(live) < desired or ready < desired:
        if containers_ready > warmed:
            progressing = condition(
                conditions.PROGRESSING,
                "True",
                WARMING_UP,
                f"{containers_ready - warmed} pod(s) warming up, {ready} of {desired} ready",
            )
        else:
            progressing = condition(
                conditions.PROGRESSING,
                "True",
                STARTING,
                f"{ready} of {desired} replicas ready; pods are starting",
            )
    elif len(live) > desired or terminating:
        progressing = condition(
            conditions.PROGRESSING, "True", TERMINATING, f"scaling down to {desired} replicas"
        )
    else:
        progressing = condition(
            conditions.PROGRESSING, "False", STABLE, f"{desired} replicas ready and warmed"
        )

    existing = conditions.as_read(md, existing_conditions)
    stats = startup.stats_for(md_namespace=md.namespace, md_name=md.name, pods=pods)
    warm_up = (
        WarmUpStatus(
            median_seconds_to_ready=_round(stats.median_seconds_to_ready),
            median_seconds_to_warm=_round(stats.median_seconds_to_warm),
            samples=stats.samples_warm,
        )
        if stats.samples_ready or stats.samples_warm
        else None
    )
    return ModelDeploymentStatus(
        observed_generation=md.metadata.generation,
        replicas=len(live),
        ready_replicas=ready,
        warmed_replicas=warmed,
        desired_replicas=desired,
        selector=names.selector_string(md),
        conditions=conditions.merge(
            existing,
            [
                _ready(
                    ready=ready,
                    desired=desired,
                    min_replicas=md.spec.min_replicas,
                    stable=progressing.status == "False",
                ),
                available,
                progressing,
                _degraded(live, apply_error),
            ],
            now=now,
            generation=md.metadata.generation,
        ),
        **({"warm_up": warm_up} if warm_up is not None else {}),
    )


def invalid_spec(
    existing: Sequence[Condition], *, message: str, generation: int | None, now: float
) -> ModelDeploymentStatus:
    """Status of a ModelDeployment whose spec could not be parsed (it slipped past the
    schema, e.g. written before the CRD was upgraded): Degraded, with what to fix."""
    return ModelDeploymentStatus(
        observed_generation=generation,
        conditions=conditions.merge(
            existing,
            [condition(conditions.DEGRADED, "True", INVALID_SPEC, message)],
            now=now,
            generation=generation,
        ),
    )
