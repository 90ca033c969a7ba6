"""The status a reconcile pass writes: what a user sees in `kubectl get/describe mdep`."""

from __future__ import annotations

import math
from typing import Any

import pytest

from modelscale import podfacts
from modelscale.api.v1alpha1 import (
    Condition,
    ModelDeployment,
    ModelDeploymentStatus,
    NotSerialisableError,
    to_api,
)
from modelscale.autoscaling.types import Observation, Recommendation, ScalingState
from modelscale.control import scaling, status

NOW = 1_800_000_000.0


def md(**spec: Any) -> ModelDeployment:
    return ModelDeployment.model_validate(
        {
            "metadata": {"name": "llama", "namespace": "llm", "generation": 3},
            "spec": {"model": {"name": "m", "repository": "s3://b"}, **spec},
        }
    )


def at_least(min_replicas: int) -> ModelDeployment:
    # Scale to zero is External mode's (KEDA); Predictive refuses minReplicas 0.
    mode = "External" if min_replicas == 0 else "Predictive"
    return md(minReplicas=min_replicas, scaling={"mode": mode})


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
        *(
            pytest.param(
                [pod("a", containers_ready=True, warmed=False, warm_reason=gate)],
                1,
                ("False", "MinimumReplicasUnavailable"),
                ("True", "WarmingUp"),
                ("True", degraded),
                id=id_,
            )
            for gate, degraded, id_ in (
                ("ModelNotReady", "WarmUpFailing", "warm-up-failing"),
                # Every pod would refuse it: the spec must change, said as such.
                ("InvalidWarmUpRequest", "InvalidWarmUpRequest", "warm-up-request-rejected"),
            )
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
    st = run(at_least(min(desired, 1)), raw, desired=desired)
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


# --------------------------------------------------------------------------- typed status


def test_the_reconcile_patch_leaves_the_scaling_loops_fields_alone() -> None:
    st = run(md(), [pod("a", ready=True, warmed=True)], desired=1)
    # Merge patch: only what this pass owns; `autoscaling` belongs to the scaling loop.
    assert "autoscaling" not in st and "kopf" not in st
    assert {c["type"] for c in st["conditions"]} == {
        "Ready",
        "Available",
        "Progressing",
        "Degraded",
    }


def test_conditions_of_other_writers_survive_a_reconcile_pass() -> None:
    theirs = Condition(
        type="ScalingActive",
        status="True",
        reason="Active",
        message="ok",
        last_transition_time="2027-01-15T07:00:00Z",
    )
    built = status.compute(
        md(), desired=0, pods=[], apply_error=None, now=NOW, existing_conditions=[theirs]
    )
    assert [c.type for c in built.conditions] == [
        "Ready",
        "Available",
        "Progressing",
        "Degraded",
        "ScalingActive",
    ]
    assert built.conditions[-1] == theirs


def scaling_status(token_rate: float, *, desired: int | None) -> ModelDeploymentStatus:
    rec = Recommendation(replicas=3, reason="ForecastTokenRate", message="m")
    obs = Observation(
        now=NOW,
        token_rate=token_rate,
        p99_seconds=None,
        queue_depth=None,
        sample_time=NOW,
        warmed_replicas=2,
        current_replicas=2,
    )
    return scaling.status(md(), obs=obs, rec=rec, state=ScalingState(), desired=desired, now=NOW)


@pytest.mark.parametrize(
    ("token_rate", "desired", "written"),
    [
        pytest.param(812.54, 3, {"currentTokenRate": 812.5, "desired": 3}, id="acting"),
        pytest.param(812.54, None, {"currentTokenRate": 812.5, "desired": None}, id="not-acting"),
    ],
)
def test_scaling_status_is_typed_and_written_as_a_merge_patch(
    token_rate: float, desired: int | None, written: dict[str, Any]
) -> None:
    patch = to_api(scaling_status(token_rate, desired=desired), patch=True)
    auto = patch["autoscaling"]
    assert auto["currentTokenRate"] == written["currentTokenRate"]
    assert auto["recommendedReplicas"] == 3 and auto["reason"] == "ForecastTokenRate"
    # What the policy could not tell is written as null, so a stale figure is removed.
    assert "predictedTokenRate" in auto and auto["predictedTokenRate"] is None
    assert patch.get("desiredReplicas") == written["desired"]
    assert "replicas" not in patch and "selector" not in patch  # the reconcile pass's
    assert [c["type"] for c in patch["conditions"]] == ["ScalingActive"]


@pytest.mark.parametrize(
    "bad", [pytest.param(math.nan, id="nan"), pytest.param(math.inf, id="inf")]
)
def test_non_finite_numbers_are_refused_with_the_field_named(bad: float) -> None:
    with pytest.raises(NotSerialisableError, match=r"autoscaling\.currentTokenRate is (nan|inf)"):
        to_api(scaling_status(bad, desired=3), patch=True)


@pytest.mark.parametrize(
    ("raw", "desired", "min_replicas", "ready"),
    [
        pytest.param(
            [pod("a", ready=True, warmed=True), pod("b", ready=True, warmed=True)],
            2,
            1,
            ("True", "ReplicasWarmed"),
            id="stable-all-warmed",
        ),
        pytest.param(
            [pod("a", ready=True, warmed=True), pod("b", containers_ready=True, warmed=False)],
            2,
            1,
            ("True", "ReplicasWarmed"),
            id="scaling-up-minimum-warmed",
        ),
        pytest.param(
            [pod("a", ready=True, warmed=True), pod("b", containers_ready=True, warmed=False)],
            2,
            2,
            ("False", "TooFewReplicasWarmed"),
            id="below-min-replicas",
        ),
        pytest.param(
            [pod("a", containers_ready=True, warmed=False, warm_reason="WarmUpInProgress")],
            1,
            1,
            ("False", "TooFewReplicasWarmed"),
            id="only-pod-warming",
        ),
        pytest.param([], 0, 0, ("False", "TooFewReplicasWarmed"), id="scaled-to-zero"),
    ],
)
def test_ready_condition_for_kubectl_wait(
    raw: list[dict[str, Any]], desired: int, min_replicas: int, ready: tuple[str, str]
) -> None:
    st = run(at_least(min_replicas), raw, desired=desired)
    assert cond(st, "Ready") == ready
    # Ready is listed first and says how many are warmed against what it needs.
    first = st["conditions"][0]
    assert first["type"] == "Ready"
    assert f"of {desired} replicas warmed" in first["message"]
