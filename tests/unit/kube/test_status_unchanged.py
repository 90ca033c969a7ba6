"""A status patch is sent only when it would change what is stored (merge-patch rules)."""

from __future__ import annotations

from typing import Any

import pytest

from modelscale.kube.status import merge_changes, without

STORED: dict[str, Any] = {
    "desiredReplicas": 2,
    "autoscaling": {"reason": "MetricsMissing", "decisions": [{"replicas": 2}], "x": 1.0},
    "conditions": [{"type": "ScalingActive", "status": "False"}],
    "kopf": {"progress": {}},
}


@pytest.mark.parametrize(
    ("patch", "changes"),
    [
        pytest.param({"desiredReplicas": 2}, False, id="same-scalar"),
        pytest.param({"desiredReplicas": 3}, True, id="other-scalar"),
        pytest.param({"autoscaling": {"reason": "MetricsMissing"}}, False, id="nested-subset"),
        pytest.param({"autoscaling": {"x": 1}}, False, id="int-equals-float-read-back"),
        pytest.param({"autoscaling": {"state": None}}, False, id="null-for-absent-key"),
        pytest.param({"autoscaling": {"x": None}}, True, id="null-removes-a-key"),
        pytest.param({"autoscaling": {"decisions": []}}, True, id="list-replaced-whole"),
        pytest.param(
            {"conditions": [{"type": "ScalingActive", "status": "False"}]}, False, id="same-list"
        ),
        pytest.param({"observedGeneration": 4}, True, id="new-key"),
        pytest.param({}, False, id="empty-patch"),
    ],
)
def test_merge_changes(patch: dict[str, Any], changes: bool) -> None:
    assert merge_changes(STORED, patch) is changes


def test_an_object_patch_over_a_non_object_changes_it() -> None:
    assert merge_changes({"autoscaling": "broken"}, {"autoscaling": {"reason": "X"}})


def test_volatile_paths_are_left_out_of_the_comparison() -> None:
    patch = {"autoscaling": {"reason": "MetricsMissing", "learnedState": "{...new...}"}}
    stored = {"autoscaling": {"reason": "MetricsMissing", "learnedState": "{...old...}"}}
    assert merge_changes(stored, patch)
    trimmed = without(patch, [("autoscaling", "learnedState"), ("absent", "key")])
    assert not merge_changes(stored, trimmed)
    assert patch["autoscaling"]["learnedState"] == "{...new...}"  # the patch is not changed
    other = {"autoscaling": {"reason": "MetricsStale", "learnedState": "{...new...}"}}
    assert merge_changes(stored, without(other, [("autoscaling", "learnedState")]))
