"""Which replica count the operator applies to the child Deployment, per scaling mode."""

from __future__ import annotations

from typing import Any

import pytest

from modelscale.api.v1alpha1 import ModelDeploymentSpec
from modelscale.control import replicas


def spec(**over: Any) -> ModelDeploymentSpec:
    raw: dict[str, Any] = {
        "model": {"name": "m", "repository": "s3://b/m"},
        "minReplicas": 2,
        "maxReplicas": 6,
    }
    raw.update(over)
    return ModelDeploymentSpec.model_validate(raw)


@pytest.mark.parametrize(
    ("over", "status_desired", "running", "expected"),
    [
        pytest.param({}, None, None, (2, "MinReplicas"), id="new-predictive-starts-at-min"),
        pytest.param({}, 5, 3, (3, "Running"), id="predictive-leaves-replicas-to-scaling-loop"),
        pytest.param({}, 5, None, (5, "Autoscaler"), id="predictive-recreates-at-last-decision"),
        pytest.param({}, 9, 8, (6, "Running"), id="running-clamped-to-new-max"),
        pytest.param(
            {}, None, 4, (4, "Running"), id="predictive-before-first-decision-keeps-running"
        ),
        pytest.param(
            {"scaling": {"mode": "External"}, "replicas": 3},
            5,
            4,
            (3, "SpecReplicas"),
            id="external-honours-spec-replicas",
        ),
        pytest.param(
            {"scaling": {"mode": "External"}},
            None,
            1,
            (2, "Running"),
            id="external-without-replicas-clamps-running",
        ),
        pytest.param(
            {"scaling": {"mode": "RecommendOnly"}},
            5,
            3,
            (3, "Running"),
            id="recommend-only-never-acts-on-recommendation",
        ),
        pytest.param(
            {"scaling": {"mode": "RecommendOnly"}},
            None,
            None,
            (2, "MinReplicas"),
            id="recommend-only-new-starts-at-min",
        ),
    ],
)
def test_choose(
    over: dict[str, Any], status_desired: int | None, running: int | None, expected: tuple[int, str]
) -> None:
    choice = replicas.choose(spec(**over), status_desired=status_desired, running=running)
    assert (choice.replicas, choice.source) == expected
