"""The status a reconcile pass writes: what a user sees in `kubectl get/describe mdep`."""

from __future__ import annotations

from typing import Any

import pytest

from modelscale import podfacts
from modelscale.api.v1alpha1 import ModelDeployment, to_api
from modelscale.control import status

NOW = 1_800_000_000.0


def md(**spec: Any) -> ModelDeployment:
    return ModelDeployment.model_validate(
        {
            "metadata": {"name": "llama", "namespace": "llm", "generation": 3},
            "spec": {"model": {"name": "m", "repository": "s3://b"}, **spec},
        }
    )


def pod(
    name: str,
    *,
    ready: bool = False,
    warmed: bool | None = None,
    containers_ready: bool = False,
    waiting: str | None = None,
    unschedulable: str | None = None,
    deleting: bool = False,
    warm_reason: str = "WarmedUp",
) -> dict[str, Any]:
    conds: list[dict[str, Any]] = [
        {"type": "Ready", "status": str(ready)},
        {"type": "ContainersReady", "status": str(containers_ready or ready)},
    ]
    if warmed is not None:
        conds.append(
            {
                "type": "modelscale.dev/warmed-up",
                "status": str(warmed),
                "reason": warm_reason,
                "message": "m",
            }
        )
    if unschedulable:
        conds.append(
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": unschedulable,
            }
        )
    cs = (
        [{"name": "triton", "state": {"waiting": {"reason": waiting, "message": "x"}}}]
        if waiting
        else []
    )
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "llm",
        "labels": {"modelscale.dev/modeldeployment": "llama"},
        "creationTimestamp": "2027-01-15T08:00:00Z",
    }
    if deleting:
        meta["deletionTimestamp"] = "2027-01-15T08:10:00Z"
    return {
        "metadata": meta,
        "status": {"phase": "Running", "conditions": conds, "containerStatuses": cs},
    }


def run(
    m: ModelDeployment, raw: list[dict[str, Any]], *, desired: int, apply_error: str | None = None
) -> dict[str, Any]:
    # What the pass writes: the typed status as the merge patch the apiserver receives.
    built = status.compute(
        m,
        desired=desired,
        pods=[podfacts.read(p) for p in raw],
        apply_error=apply_error,
        now=NOW,
    )
    return to_api(built, patch=True)


def cond(st: dict[str, Any], type_: str) -> tuple[str, str]:
    c = next(c for c in st["conditions"] if c["type"] == type_)
    return c["status"], c["reason"]


@pytest.mark.parametrize(
    ("raw", "desired", "available", "progressing", "degraded"),
    [
        pytest.param(
            [pod("a", ready=True, warmed=True), pod("b", ready=True, warmed=True)],
            2,
            ("True", "MinimumReplicasReady"),
            ("False", "Stable"),
            ("False", "AsExpected"),
            id="all-warmed",
        ),
        pytest.param(
            [pod("a", containers_ready=True, warmed=False, warm_reason="WarmUpInProgress")],
            1,
            ("False", "MinimumReplicasUnavailable"),
            ("True", "WarmingUp"),
            ("False", "AsExpected"),
            id="warming-not-available",
        ),
        pytest.param(
            [pod("a", containers_ready=True, warmed=False, warm_reason="ModelNotReady")],
            1,
            ("False", "MinimumReplicasUnavailable"),
            ("True", "WarmingUp"),
            ("True", "WarmUpFailing"),
            id="warm-up-failing",
        ),
        pytest.param(
            [
                pod("a", ready=True, warmed=True),
                pod("b", unschedulable="0/3 nodes: Insufficient nvidia.com/gpu"),
            ],
            2,
            ("True", "MinimumReplicasReady"),
            ("True", "ReplicasStarting"),
            ("True", "Unschedulable"),
            id="pending-for-gpus",
        ),
        pytest.param(
            [pod("a", waiting="CrashLoopBackOff")],
            1,
            ("False", "MinimumReplicasUnavailable"),
            ("True", "ReplicasStarting"),
            ("True", "ContainersFailing"),
            id="crash-loop",
        ),
        pytest.param(
            [pod("a", ready=True, warmed=True), pod("b", ready=True, warmed=True, deleting=True)],
            1,
            ("True", "MinimumReplicasReady"),
            ("True", "ReplicasTerminating"),
            ("False", "AsExpected"),
            id="scaling-down",
        ),
        pytest.param(
            [], 0, ("True", "ScaledToZero"), ("False", "Stable"), ("False", "AsExpected"), id="zero"
        ),
    ],
)
def test_conditions(
    raw: list[dict[str, Any]],
    desired: int,
    available: tuple[str, str],
    progressing: tuple[str, str],
    degraded: tuple[str, str],
) -> None:
    st = run(md(minReplicas=min(desired, 1)), raw, desired=desired)
    assert cond(st, "Available") == available
    assert cond(st, "Progressing") == progressing
    assert cond(st, "Degraded") == degraded


def test_counts_selector_and_generation() -> None:
    raw = [pod("a", ready=True, warmed=True), pod("b", containers_ready=True, warmed=False)]
    st = run(md(), raw, desired=3)
    assert (st["replicas"], st["readyReplicas"], st["warmedReplicas"], st["desiredReplicas"]) == (
        2,
        1,
        1,
        3,
    )
    assert st["selector"] == "modelscale.dev/modeldeployment=llama"
    assert st["observedGeneration"] == 3
    assert all(c["observedGeneration"] == 3 for c in st["conditions"])


def test_apply_error_is_degraded_with_the_message() -> None:
    st = run(md(), [], desired=1, apply_error="the apiserver refused a child object (422)")
    assert cond(st, "Degraded") == ("True", "ApplyFailed")
