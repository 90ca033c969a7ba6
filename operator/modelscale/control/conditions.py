"""Conditions the Kubernetes way: `lastTransitionTime` moves only when `status` changes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from modelscale.api.v1alpha1 import to_rfc3339 as timestamp

ConditionStatus = Literal["True", "False", "Unknown"]

AVAILABLE = "Available"
PROGRESSING = "Progressing"
DEGRADED = "Degraded"
SCALING_ACTIVE = "ScalingActive"


@dataclass(frozen=True)
class Condition:
    type: str
    status: ConditionStatus
    reason: str
    message: str


def merge(
    existing: list[dict[str, Any]],
    updates: list[Condition],
    *,
    now: float,
    generation: int | None,
) -> list[dict[str, Any]]:
    """Return `existing` with `updates` applied; conditions not updated are kept as they
    are, so two writers that own different condition types do not erase each other."""
    by_type = {c.get("type"): dict(c) for c in existing}
    for cond in updates:
        old = by_type.get(cond.type)
        changed = old is None or old.get("status") != cond.status
        by_type[cond.type] = {
            "type": cond.type,
            "status": cond.status,
            "reason": cond.reason,
            "message": cond.message,
            "lastTransitionTime": timestamp(now)
            if changed or old is None
            else old.get("lastTransitionTime", timestamp(now)),
            "observedGeneration": generation,
        }
    order = {AVAILABLE: 0, PROGRESSING: 1, DEGRADED: 2, SCALING_ACTIVE: 3}
    return sorted(
        by_type.values(), key=lambda c: (order.get(str(c.get("type")), 99), str(c.get("type")))
    )


def find(conditions: list[dict[str, Any]], type_: str) -> dict[str, Any] | None:
    return next((c for c in conditions if c.get("type") == type_), None)
