"""The pod's readiness gate `modelscale.dev/warmed-up`: when a pod needs a warm-up, when
its gate must close again, and the condition and `pods/status` patch to write. Pure."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from modelscale.api.v1alpha1 import Condition, to_api, to_rfc3339
from modelscale.podfacts import ANNOTATION_WARMED_RESTARTS, CONDITION_TYPE, PodFacts


def needs_warmup(facts: PodFacts) -> bool:
    return (
        facts.containers_ready
        and not facts.warmed
        and not facts.deleting
        and facts.ip is not None
        and facts.modeldeployment is not None
    )


def cold_again(facts: PodFacts) -> bool:
    """A warmed pod whose container restarted since its warm-up serves a cold model again:
    its gate must close until it is warmed anew (or a user would hit the cold start)."""
    recorded = facts.annotations.get(ANNOTATION_WARMED_RESTARTS)
    return (
        facts.warmed
        and recorded is not None
        and recorded.isdigit()
        and (facts.restarts > int(recorded))
    )


def warmed_condition(
    *, status: bool, reason: str, message: str, now: float, previous: Condition | None
) -> Condition:
    """The pod condition; lastTransitionTime moves only when the status changes."""
    status_text = "True" if status else "False"
    since = to_rfc3339(now)
    if previous is not None and previous.status == status_text and previous.last_transition_time:
        since = previous.last_transition_time
    return Condition(
        type=CONDITION_TYPE,
        status=status_text,
        reason=reason,
        message=message,
        last_transition_time=since,
    )


@dataclasses.dataclass(frozen=True)
class GateChange:
    """One write to a pod: its gate condition and the annotations that go with it (None
    removes one)."""

    condition: Condition
    annotations: Mapping[str, str | None] = dataclasses.field(default_factory=dict)


def status_patch(
    condition: Condition, *, uid: str = "", annotations: Mapping[str, str | None] | None = None
) -> dict[str, Any]:
    """Strategic merge patch for `pods/status`: conditions merge by `type`. With `uid` the
    apiserver refuses to patch a different pod that took the same name.

    `annotations` (None removes one) ride in the same patch: the pod status strategy keeps
    metadata changes other than owner references, so the gate and its bookkeeping (the
    restart count that re-closes the gate after a container restart) are stored together
    or not at all."""
    patch: dict[str, Any] = {"status": {"conditions": [to_api(condition)]}}
    metadata: dict[str, Any] = {}
    if uid:
        metadata["uid"] = uid
    if annotations:
        metadata["annotations"] = dict(annotations)
    if metadata:
        patch["metadata"] = metadata
    return patch


def condition_differs(
    previous: Condition | None, *, status: bool, reason: str, message: str
) -> bool:
    """Whether writing this condition would change anything a user sees."""
    if previous is None:
        return True
    return (
        previous.status != ("True" if status else "False")
        or previous.reason != reason
        or previous.message != message
    )
