"""`spec.serving`: what a user writes is accepted as Triton would take it, and a setting a
backend would silently ignore, or a level that does not exist, is refused with a message."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import ValidationError

from modelscale.api import v1alpha1
from modelscale.api.v1alpha1 import ModelDeploymentSpec


def spec(serving: dict[str, Any] | None, *, backend: str = "python") -> dict[str, Any]:
    body: dict[str, Any] = {"model": {"name": "m", "repository": "/models", "backend": backend}}
    if serving is not None:
        body["serving"] = serving
    return body


def test_unset_changes_nothing() -> None:
    assert ModelDeploymentSpec.model_validate(spec(None)).serving is None


def test_a_full_policy_is_accepted() -> None:
    parsed = ModelDeploymentSpec.model_validate(
        spec(
            {
                "instanceCount": 2,
                "dynamicBatching": {
                    "preferredBatchSizes": [4, 8],
                    "maxQueueDelayMicroseconds": 500,
                },
                "queue": {"maxQueueSize": 16},
                "priorities": {
                    "levels": 2,
                    "defaultLevel": 2,
                    "queues": [
                        {
                            "level": 2,
                            "maxQueueSize": 4,
                            "defaultTimeoutMicroseconds": 200_000,
                            "timeoutAction": "REJECT",
                        }
                    ],
                },
            }
        )
    ).serving
    assert parsed is not None and parsed.priorities is not None
    assert parsed.priorities.queues[0].default_timeout_microseconds == 200_000
    assert parsed.uses_dynamic_batcher


def test_instance_count_alone_is_fine_on_vllm() -> None:
    parsed = ModelDeploymentSpec.model_validate(spec({"instanceCount": 1}, backend="vllm"))
    assert parsed.serving is not None and not parsed.serving.uses_dynamic_batcher


@pytest.mark.parametrize(
    ("serving", "backend", "message"),
    [
        pytest.param(
            {"dynamicBatching": {}}, "vllm", v1alpha1.MSG_CONTINUOUS_BATCHING, id="batcher-vllm"
        ),
        pytest.param(
            {"queue": {"maxQueueSize": 1}},
            "tensorrtllm",
            v1alpha1.MSG_CONTINUOUS_BATCHING,
            id="queue-trtllm",
        ),
        pytest.param(
            {"priorities": {"levels": 2, "defaultLevel": 0}},
            "python",
            "greater than or equal to 1",
            id="default-level-zero",
        ),
        pytest.param(
            {"priorities": {"levels": 2, "defaultLevel": 3}},
            "python",
            v1alpha1.MSG_DEFAULT_LEVEL,
            id="default-level-over",
        ),
        pytest.param(
            {"priorities": {"levels": 1, "defaultLevel": 1, "queues": [{"level": 2}]}},
            "python",
            v1alpha1.MSG_QUEUE_LEVEL,
            id="queue-of-missing-level",
        ),
        pytest.param({"queue": {"timeoutAction": "DROP"}}, "python", "REJECT", id="unknown-action"),
        pytest.param(
            {"dynamicBatching": {"preferredBatchSizes": [0]}},
            "python",
            "greater than or equal to 1",
            id="zero-batch-size",
        ),
        pytest.param(
            {"instanceCount": 0}, "python", "greater than or equal to 1", id="no-instance"
        ),
        pytest.param({"queues": []}, "python", "Extra inputs", id="typo"),
    ],
)
def test_bad_policy_is_refused_with_a_message(
    serving: dict[str, Any], backend: str, message: str
) -> None:
    with pytest.raises(ValidationError, match=re.escape(message)):
        ModelDeploymentSpec.model_validate(spec(serving, backend=backend))


def test_crd_carries_the_cross_field_rules() -> None:
    from modelscale.api import crd  # noqa: PLC0415

    schema = crd.openapi_schema()["properties"]["spec"]
    rules = [r["message"] for r in schema.get("x-kubernetes-validations", [])]
    assert v1alpha1.MSG_CONTINUOUS_BATCHING in rules
    priorities = schema["properties"]["serving"]["properties"]["priorities"]
    assert {r["message"] for r in priorities["x-kubernetes-validations"]} == {
        v1alpha1.MSG_DEFAULT_LEVEL,
        v1alpha1.MSG_QUEUE_LEVEL,
    }
