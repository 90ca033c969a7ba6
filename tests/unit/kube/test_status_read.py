"""The conditions a guarded status write merges into are read on their own."""

from __future__ import annotations

from typing import Any

import pytest

from modelscale.kube import status


@pytest.mark.parametrize(
    ("body", "types"),
    [
        pytest.param({"metadata": {}}, [], id="no-status"),
        pytest.param(
            {"status": {"conditions": [{"type": "Available", "status": "True"}]}},
            ["Available"],
            id="one",
        ),
        pytest.param(
            {
                "status": {
                    "conditions": [
                        {"type": "Available", "status": "Maybe"},
                        {"type": "Degraded", "status": "False"},
                    ],
                    # Another writer's field the models would refuse: not our business here.
                    "autoscaling": {"decisions": [{"time": "x"}] * 11},
                }
            },
            ["Degraded"],
            id="malformed-condition-dropped",
        ),
    ],
)
def test_conditions_of(body: dict[str, Any], types: list[str]) -> None:
    assert [c.type for c in status.conditions_of(body)] == types
