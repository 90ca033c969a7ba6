"""The content-guarded last try of a status write (`kube.status.content_guarded`): a JSON
Patch with a merge patch's effect, applied only while the lists it replaces are as read."""

from __future__ import annotations

from typing import Any

import jsonpatch
import pytest

from modelscale.kube import status

STORED: dict[str, Any] = {
    "warmedReplicas": 1,
    "conditions": [{"type": "Ready", "status": "True", "message": "1 of 1"}],
    "autoscaling": {"reason": "Steady", "recommendedReplicas": 1, "decisions": [{"r": 1}]},
    "kopf": {"progress": {}},
}


def test_the_patch_has_the_merge_patchs_effect_and_tests_the_lists_first() -> None:
    patch = {
        "warmedReplicas": 2,
        "conditions": [{"type": "Ready", "status": "True", "message": "2 of 2"}],
        "autoscaling": {"reason": "Burst", "message": None},
    }
    ops = status.content_guarded(STORED, patch)
    assert ops is not None
    assert ops[0] == {"op": "test", "path": "/status/conditions", "value": STORED["conditions"]}
    assert all(op["op"] != "test" for op in ops[1:])
    after = jsonpatch.apply_patch({"status": STORED}, ops)["status"]
    assert after == status.merged(STORED, patch)
    # Keys the write did not set (another writer's, kopf's) are left as they were.
    assert after["kopf"] == {"progress": {}}
    assert after["autoscaling"]["decisions"] == [{"r": 1}]
    assert after["autoscaling"]["recommendedReplicas"] == 1


def test_the_patch_fails_when_another_writer_changed_a_list() -> None:
    patch = {"conditions": [{"type": "Ready", "status": "False", "message": "0 of 1"}]}
    ops = status.content_guarded(STORED, patch)
    moved = {**STORED, "conditions": [*STORED["conditions"], {"type": "Theirs"}]}
    with pytest.raises(jsonpatch.JsonPatchTestFailed):
        jsonpatch.apply_patch({"status": moved}, ops)


def test_no_guard_can_be_built_for_a_list_the_status_lacks() -> None:
    """A JSON Patch cannot test that a path is absent: the caller raises the conflict."""
    assert status.content_guarded({"warmedReplicas": 1}, {"conditions": []}) is None
    nested = {"autoscaling": {"decisions": [{"r": 2}]}}
    assert status.content_guarded({"autoscaling": {}}, nested) is None


def test_a_merge_patch_applies_as_rfc_7386_says() -> None:
    assert status.merged({"a": 1, "b": {"c": 2, "d": 3}}, {"b": {"c": None, "e": 4}}) == {
        "a": 1,
        "b": {"d": 3, "e": 4},
    }
    assert status.merged({"a": [1, 2]}, {"a": [3]}) == {"a": [3]}
    assert status.merged(None, {"a": None, "b": 1}) == {"b": 1}
