"""One reading of a pod: everything the reconcile pass, the scaling loop and the warm-up
need to know about it, read from its body (camelCase JSON, as kopf and
`ApiClient.sanitize_for_serialization` give it) once per pod per pass.

Pure: no clock, no client. The pod annotations the operator keeps are named here because
this is where they are read; `warmup.cost` and `warmup.startup` decide what to write."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from modelscale.api.v1alpha1 import WARMED_UP_CONDITION, Condition, from_rfc3339
from modelscale.resources.names import LABEL_MODELDEPLOYMENT
from modelscale.warmup import reasons

# The readiness gate and the label that ties a pod to its ModelDeployment.
CONDITION_TYPE = WARMED_UP_CONDITION
MD_LABEL = LABEL_MODELDEPLOYMENT

# Pod annotations the operator reads and writes.
ANNOTATION_SECONDS_TO_READY = "modelscale.dev/seconds-to-ready"
ANNOTATION_SECONDS_TO_WARM = "modelscale.dev/seconds-to-warm"
ANNOTATION_ATTEMPTS = "modelscale.dev/warm-up-attempts"
ANNOTATION_WARMED_RESTARTS = "modelscale.dev/warmed-at-restart-count"
ANNOTATION_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"

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
        reasons.IN_PROGRESS,
        reasons.CANCELLED,
        reasons.RESTARTED,
    }
)


@dataclass(frozen=True)
class Crashes:
    """Container exits of a pod that never became ready: a model failing to load makes
    Triton exit (`failed to load all models`) and the kubelet restart it."""

    restarts: int
    message: str


@dataclass(frozen=True)
class PodFacts:
    """What the operator knows about one pod, read from its body once."""

    namespace: str
    name: str
    uid: str
    modeldeployment: str | None
    ip: str | None
    created: float | None
    deleting: bool
    containers_ready: bool
    containers_ready_since: float | None
    ready: bool
    warmed: bool
    warmed_condition: Condition | None
    attempts: int
    seconds_to_ready: float | None
    seconds_to_warm: float | None
    annotations: Mapping[str, str] = field(default_factory=dict)
    restarts: int = 0  # container restarts, summed over the pod's containers
    unschedulable_message: str | None = None
    stuck_message: str | None = None
    warmup_failure: str | None = None
    crashes: Crashes | None = None
    node: str | None = None
    # False when the pod's node is NotReady: it serves nothing and is no capacity, long
    # before the node's taint evicts it (~5 min).
    node_ready: bool = True


def time_or_none(value: Any) -> float | None:
    """An RFC 3339 time from a pod body, or None when absent or unreadable."""
    if not isinstance(value, str):
        return None
    try:
        return from_rfc3339(value)
    except ValueError:
        return None


def _float_or_none(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _crashes(container_statuses: list[Mapping[str, Any]]) -> Crashes | None:
    worst: Crashes | None = None
    for cs in container_statuses:
        restarts = int(cs.get("restartCount") or 0)
        last = _mapping(_mapping(cs.get("lastState")).get("terminated"))
        now_state = _mapping(_mapping(cs.get("state")).get("terminated"))
        terminated = now_state or last
        code = terminated.get("exitCode")
        if restarts == 0 and not now_state:
            continue
        if code == 0 and not restarts:
            continue
        detail = " ".join(
            str(x) for x in (terminated.get("reason"), terminated.get("message")) if x
        )
        exits = restarts + (1 if now_state else 0)
        message = (
            f"container {cs.get('name')} exited {exits} time(s) "
            f"before the model was ready (last exit code {code}"
            + (f": {detail[:300]}" if detail else "")
            + ")"
        )
        if worst is None or exits > worst.restarts:
            worst = Crashes(restarts=exits, message=message)
    return worst


def _stuck(container_statuses: list[Mapping[str, Any]]) -> str | None:
    for cs in container_statuses:
        waiting = _mapping(_mapping(cs.get("state")).get("waiting"))
        if waiting.get("reason") in STUCK_REASONS:
            return (
                f"container {cs.get('name')}: {waiting.get('reason')}: {waiting.get('message', '')}"
            )
    return None


def _gate(raw: Mapping[str, Any] | None) -> Condition | None:
    if raw is None:
        return None
    try:
        return Condition.model_validate(raw)
    except ValidationError:
        return None  # someone wrote a malformed gate: treat it as not written


def read(pod: Mapping[str, Any], *, ready_nodes: frozenset[str] | None = None) -> PodFacts:
    """The facts of one pod body. `ready_nodes`: the nodes whose Ready condition is True
    (None: not known, every node counts as ready)."""
    meta = _mapping(pod.get("metadata"))
    node = _mapping(pod.get("spec")).get("nodeName")
    status = _mapping(pod.get("status"))
    labels = _mapping(meta.get("labels"))
    annotations = {str(k): str(v) for k, v in _mapping(meta.get("annotations")).items()}
    by_type = {c.get("type"): c for c in status.get("conditions") or () if isinstance(c, Mapping)}
    containers = by_type.get("ContainersReady")
    ready = by_type.get("Ready")
    scheduled = by_type.get("PodScheduled")
    warmed = _gate(by_type.get(CONDITION_TYPE))
    container_statuses = [cs for cs in status.get("containerStatuses") or () if cs]
    attempts_raw = annotations.get(ANNOTATION_ATTEMPTS, "0")
    unschedulable = (
        scheduled.get("message") or "unschedulable"
        if scheduled is not None
        and scheduled.get("status") == "False"
        and scheduled.get("reason") == "Unschedulable"
        else None
    )
    warmup_failure = (
        f"{warmed.reason}: {warmed.message}"
        if warmed is not None and warmed.status == "False" and warmed.reason not in NOT_FAILURES
        else None
    )
    pod_ip = status.get("podIP")
    return PodFacts(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        modeldeployment=labels.get(MD_LABEL),
        ip=str(pod_ip) if pod_ip else None,
        created=time_or_none(meta.get("creationTimestamp")),
        deleting=meta.get("deletionTimestamp") is not None,
        containers_ready=containers is not None and containers.get("status") == "True",
        containers_ready_since=time_or_none(containers.get("lastTransitionTime"))
        if containers
        else None,
        ready=ready is not None and ready.get("status") == "True",
        warmed=warmed is not None and warmed.status == "True",
        warmed_condition=warmed,
        attempts=int(attempts_raw) if attempts_raw.isdigit() else 0,
        seconds_to_ready=_float_or_none(annotations.get(ANNOTATION_SECONDS_TO_READY)),
        seconds_to_warm=_float_or_none(annotations.get(ANNOTATION_SECONDS_TO_WARM)),
        annotations=annotations,
        restarts=sum(int(cs.get("restartCount") or 0) for cs in container_statuses),
        unschedulable_message=unschedulable,
        stuck_message=_stuck(container_statuses),
        warmup_failure=warmup_failure,
        crashes=_crashes(container_statuses),
        node=str(node) if node else None,
        node_ready=ready_nodes is None or not node or node in ready_nodes,
    )
