"""Conditions the Kubernetes way: `lastTransitionTime` moves only when `status` changes.

One condition type everywhere: the API's `Condition` (what status holds), built with
`condition(...)` and merged by type with `merge(...)`."""

from __future__ import annotations

from collections.abc import Sequence

from modelscale.api.v1alpha1 import Condition, ConditionStatus, ModelDeployment, to_rfc3339

READY = "Ready"
"""kstatus' summary condition: `kubectl wait --for=condition=Ready mdep/x`."""
AVAILABLE = "Available"
PROGRESSING = "Progressing"
DEGRADED = "Degraded"
SCALING_ACTIVE = "ScalingActive"

_ORDER = {READY: 0, AVAILABLE: 1, PROGRESSING: 2, DEGRADED: 3, SCALING_ACTIVE: 4}


def condition(type_: str, status: ConditionStatus, reason: str, message: str) -> Condition:
    """A condition as a pass decides it; `merge` adds the times and the generation."""
    return Condition(type=type_, status=status, reason=reason, message=message)


def merge(
    existing: Sequence[Condition],
    updates: Sequence[Condition],
    *,
    now: float,
    generation: int | None,
) -> list[Condition]:
    """Return `existing` with `updates` applied; conditions not updated are kept as they
    are, so two writers that own different condition types do not erase each other."""
    by_type = {c.type: c for c in existing}
    for cond in updates:
        old = by_type.get(cond.type)
        changed = old is None or old.status != cond.status
        since = (
            to_rfc3339(now)
            if changed or old is None or old.last_transition_time is None
            else old.last_transition_time
        )
        by_type[cond.type] = cond.model_copy(
            update={"last_transition_time": since, "observed_generation": generation}
        )
    return sorted(by_type.values(), key=lambda c: (_ORDER.get(c.type, 99), c.type))


def find(conditions: Sequence[Condition], type_: str) -> Condition | None:
    return next((c for c in conditions if c.type == type_), None)


def as_read(md: ModelDeployment, existing: Sequence[Condition] | None) -> Sequence[Condition]:
    """The conditions a writer merges into: `existing` (as last read before a guarded
    write) when given, else those of `md`."""
    if existing is not None:
        return existing
    return md.status.conditions if md.status else []
