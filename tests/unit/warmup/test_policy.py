"""spec.serving as the Triton configuration the model is loaded with, and the check that a
server's reported configuration has it in force."""

from __future__ import annotations

from typing import Any

import pytest

from modelscale.api.v1alpha1 import Serving
from modelscale.warmup import policy

RUNNING: dict[str, Any] = {
    "name": "toy",
    "backend": "python",
    "max_batch_size": 8,
    "input": [{"name": "text_input", "data_type": "TYPE_STRING", "dims": [1]}],
    "instance_group": [{"name": "toy", "kind": "KIND_CPU", "count": 1}],
    "dynamic_batching": {"preserve_ordering": True},
}


def serving(**fields: Any) -> Serving:
    return Serving.model_validate(fields)


def test_overlay_keeps_the_model_and_sets_the_policy() -> None:
    wanted = serving(
        instanceCount=3,
        dynamicBatching={"preferredBatchSizes": [4, 8], "maxQueueDelayMicroseconds": 100},
        priorities={"levels": 2, "defaultLevel": 2, "queues": [{"level": 1, "maxQueueSize": 2}]},
    )
    result = policy.overlay(RUNNING, wanted)
    assert result["input"] == RUNNING["input"]
    assert result["instance_group"] == [{"name": "toy", "kind": "KIND_CPU", "count": 3}]
    batching = result["dynamic_batching"]
    assert batching["preserve_ordering"] is True  # the repository's own setting is kept
    assert batching["preferred_batch_size"] == [4, 8]
    assert batching["priority_levels"] == 2
    assert batching["priority_queue_policy"]["1"]["max_queue_size"] == 2
    assert RUNNING["instance_group"][0]["count"] == 1  # the input is not changed
    assert policy.differences(result, wanted) == []


def test_differences_name_what_is_not_in_force() -> None:
    wanted = serving(instanceCount=2, queue={"maxQueueSize": 4})
    found = policy.differences(RUNNING, wanted)
    assert any("default_queue_policy" in line for line in found)
    assert any("instance_group counts are [1], want 2" in line for line in found)


def test_triton_writes_64_bit_integers_as_strings() -> None:
    wanted = serving(queue={"defaultTimeoutMicroseconds": 5000})
    reported = policy.overlay(RUNNING, wanted)
    reported["dynamic_batching"]["default_queue_policy"]["default_timeout_microseconds"] = "5000"
    assert policy.differences(reported, wanted) == []


@pytest.mark.parametrize(
    ("config", "fields", "words"),
    [
        pytest.param(
            {**RUNNING, "model_transaction_policy": {"decoupled": True}},
            {"queue": {}},
            "decoupled",
            id="decoupled",
        ),
        pytest.param(
            {**RUNNING, "max_batch_size": 0},
            {"dynamicBatching": {"preferredBatchSizes": [2]}},
            "max_batch_size 0",
            id="no-batching-model",
        ),
        pytest.param(
            RUNNING,
            {"dynamicBatching": {"preferredBatchSizes": [4, 16]}},
            "[16] exceed",
            id="over-max-batch",
        ),
    ],
)
def test_a_policy_the_model_cannot_take_is_refused(
    config: dict[str, Any], fields: dict[str, Any], words: str
) -> None:
    with pytest.raises(policy.PolicyError, match=words.replace("[", r"\[").replace("]", r"\]")):
        policy.overlay(config, serving(**fields))


def test_instance_count_alone_needs_no_batcher() -> None:
    decoupled = {**RUNNING, "model_transaction_policy": {"decoupled": True}}
    result = policy.overlay(decoupled, serving(instanceCount=2))
    assert result["dynamic_batching"] == RUNNING["dynamic_batching"]
