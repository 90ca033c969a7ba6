"""The ModelDeployment index keeps what the loops read of a body, and not the rest."""

from __future__ import annotations

import json

from modelscale.api.v1alpha1 import ModelDeployment
from modelscale.handlers.indexes import slim

SPEC = {"model": {"name": "toy_llm", "repository": "/models"}, "minReplicas": 2}
BODY = {
    "apiVersion": "modelscale.dev/v1alpha1",
    "kind": "ModelDeployment",
    "metadata": {
        "name": "md",
        "namespace": "team",
        "uid": "u-1",
        "resourceVersion": "42",
        "generation": 3,
        "labels": {"app": "x"},
        "annotations": {
            "kubectl.kubernetes.io/last-applied-configuration": json.dumps({"spec": SPEC}),
            "team/owner": "ml",
        },
        "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}] * 5,
    },
    "spec": SPEC,
    "status": {
        "desiredReplicas": 2,
        "autoscaling": {"reason": "MetricsMissing", "learnedState": "{}"},
        "kopf": {"lastHandledConfiguration": json.dumps({"spec": SPEC}), "progress": {}},
    },
}


def test_the_cached_body_parses_as_the_watched_one() -> None:
    kept, full = ModelDeployment.model_validate(slim(BODY)), ModelDeployment.model_validate(BODY)
    assert kept.spec == full.spec
    assert kept.status is not None and full.status is not None
    assert kept.status.model_dump(exclude={"kopf"}) == full.status.model_dump(exclude={"kopf"})
    assert kept.metadata.model_dump(exclude={"annotations"}) == full.metadata.model_dump(
        exclude={"annotations"}
    )
    kept = slim(BODY)
    assert kept["status"]["autoscaling"] == BODY["status"]["autoscaling"]
    assert kept["metadata"]["annotations"] == {"team/owner": "ml"}
    assert kept["apiVersion"] == BODY["apiVersion"] and kept["kind"] == BODY["kind"]


def test_the_cached_body_leaves_out_what_no_loop_reads() -> None:
    kept = slim(BODY)
    assert "managedFields" not in kept["metadata"]
    assert "kopf" not in kept["status"]
    assert len(json.dumps(kept)) < len(json.dumps(BODY)) / 2
    assert "managedFields" in BODY["metadata"]  # the watched body is not changed
