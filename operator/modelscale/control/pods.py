"""Facts about a ModelDeployment's pods, read from their status the way the kubelet and
the EndpointSlice controller read it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
    """What the reconcile pass and the scaling loop need to know about one pod. The
    warm-up's own reading of the pod (`warmup.plan.pod_facts`) supplies the common part."""

    name: str
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


def facts(pod: dict[str, Any]) -> PodFacts:
    common = warmup_plan.pod_facts(pod)
    scheduled = _condition(pod, "PodScheduled")
    unschedulable = (
        scheduled.get("message") or "unschedulable"
        if scheduled is not None
        and scheduled.get("status") == "False"
        and scheduled.get("reason") == "Unschedulable"
        else None
    )
    stuck = None
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in STUCK_REASONS:
            stuck = (
                f"container {cs.get('name')}: {waiting.get('reason')}: {waiting.get('message', '')}"
            )
            break
    warm = common.warmed_condition
    warmup_failure = (
        f"{warm.get('reason', '')}: {warm.get('message', '')}"
        if warm is not None
        and warm.get("status") == "False"
        and warm.get("reason") not in NOT_FAILURES
        else None
    )
    ready = _condition(pod, "Ready")
    return PodFacts(
        name=common.name,
        terminating=common.deleting,
        containers_ready=common.containers_ready,
        warmed=common.warmed,
        ready=ready is not None and ready.get("status") == "True",
        unschedulable_message=unschedulable,
        stuck_message=stuck,
        warmup_failure=warmup_failure,
    )
