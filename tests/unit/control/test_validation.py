"""A spec that slips past the schema gets a message naming the field to fix."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from modelscale.api.v1alpha1 import ModelDeploymentSpec
from modelscale.control import validation


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(
            {"model": {"name": "m", "repository": "r"}, "minReplicas": 5, "maxReplicas": 2},
            "minReplicas must be less than or equal to maxReplicas",
            id="min-over-max",
        ),
        pytest.param(
            {"model": {"repository": "r"}}, "model.name: Field required", id="missing-name"
        ),
        pytest.param(
            {"model": {"name": "m", "repository": "r"}, "server": {"gpus": -1}},
            "server.gpus: Input should be greater than or equal to 0",
            id="negative-gpus",
        ),
    ],
)
def test_short_names_the_field(raw: dict[str, object], expected: str) -> None:
    with pytest.raises(ValidationError) as info:
        ModelDeploymentSpec.model_validate(raw)
    assert expected in validation.short(info.value)
