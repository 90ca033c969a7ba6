"""Facts about a ModelDeployment's pods, read from their status the way the kubelet and
the EndpointSlice controller read it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from modelscale.api.v1alpha1 import WARMED_UP_CONDITION, from_rfc3339
from modelscale.warmup import plan as warmup_plan

# Container waiting reasons that will not fix themselves: the user must act.
STUCK_REASONS = frozenset(
    {
        "CrashLoopBackOff",
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
        "ImageNotKnown",
    }
)


# A warm-up that is merely under way or was interrupted is not a failure.
NOT_FAILURES = frozenset(
    {
        "",
        "Pending",
        warmup_plan.REASON_IN_PROGRESS,
        warmup_plan.REASON_CANCELLED,
        warmup_plan.REASON_RESTARTED,
    }
)


@dataclass(frozen=True)
class PodFacts:
    name: str
    ip: str | None
    phase: str
    created: float | None
    terminating: bool
    containers_ready: bool
    warmed: bool
    ready: bool
    unschedulable_message: str | None
    stuck_message: str | None
    warmup_failure: str | None


def _condition(pod: dict[str, Any], type_: str) -> dict[str, Any] | None:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == type_), None)


def _is_true(pod: dict[str, Any], type_: str) -> bool:
    cond = _condition(pod, type_)
    return cond is not None and cond.get("status") == "True"


def facts(pod: dict[str, Any]) -> PodFacts:
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    scheduled = _condition(pod, "PodScheduled")
    unschedulable = (
        scheduled.get("message") or "unschedulable"
        if scheduled is not None
        and scheduled.get("status") == "False"
        and scheduled.get("reason") == "Unschedulable"
        else None
    )
    stuck = None
    for cs in status.get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in STUCK_REASONS:
            stuck = (
                f"container {cs.get('name')}: {waiting.get('reason')}: {waiting.get('message', '')}"
            )
            break
    warm = _condition(pod, WARMED_UP_CONDITION)
    warmup_failure = (
        f"{warm.get('reason', '')}: {warm.get('message', '')}"
        if warm is not None
        and warm.get("status") == "False"
        and warm.get("reason") not in NOT_FAILURES
        else None
    )
    created = meta.get("creationTimestamp")
    return PodFacts(
        name=meta.get("name", ""),
        ip=status.get("podIP"),
        phase=status.get("phase", "Pending"),
        created=from_rfc3339(created) if isinstance(created, str) else None,
        terminating=meta.get("deletionTimestamp") is not None,
        containers_ready=_is_true(pod, "ContainersReady"),
        warmed=_is_true(pod, WARMED_UP_CONDITION),
        ready=_is_true(pod, "Ready"),
        unschedulable_message=unschedulable,
        stuck_message=stuck,
        warmup_failure=warmup_failure,
    )
