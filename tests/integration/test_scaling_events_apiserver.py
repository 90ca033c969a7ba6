"""The scaling pass's events against the real apiserver: `MetricsPartial` is posted when
partial data starts holding a scale-down and `MetricsComplete` when it ends, not on
every pass in between (the status says it every pass)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kubernetes import client

from modelscale.api.v1alpha1 import ModelDeployment
from modelscale.autoscaling import recommender
from modelscale.autoscaling.types import Recommendation
from modelscale.loops import scaling

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def ns(installed: None, module_namespace: str) -> str:
    return module_namespace


def _body(ns: str, uid: str, reason: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "modelscale.dev/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "partial", "namespace": ns, "uid": uid},
        "spec": {"model": {"name": "toy_llm", "repository": "/models"}, "minReplicas": 2},
    }
    if reason is not None:
        body["status"] = {"autoscaling": {"reason": reason}}
    return body


def test_metrics_partial_is_announced_when_it_starts_and_ends(
    kube_api: client.ApiClient, ns: str
) -> None:
    uid = str(uuid.uuid4())
    partial = recommender.METRICS_PARTIAL
    # What each pass recommends; the status each pass reads is what the previous one wrote.
    reasons = [recommender.FORECAST_TOKEN_RATE, *[partial] * 5, recommender.FORECAST_TOKEN_RATE]
    reasons += [recommender.FORECAST_TOKEN_RATE, partial, partial]
    previous: str | None = None
    for i, reason in enumerate(reasons):
        body = _body(ns, uid, previous)
        rec = Recommendation(replicas=4, reason=reason, message=f"pass {i}: 2 of 4 pods report")
        scaling._announce(  # the pass's event step, on its own
            kube_api, body, ModelDeployment.model_validate(body), rec,
            current=4, applied=False, now=1_700_000_000.0 + 15 * i,
        )  # fmt: skip
        previous = reason
    events = client.CoreV1Api(kube_api).list_namespaced_event(
        ns, field_selector=f"involvedObject.uid={uid}"
    )
    by_reason: dict[str, list[str]] = {}
    for ev in events.items:
        by_reason.setdefault(ev.reason, []).append(ev.message)
    assert sorted(by_reason) == [scaling.METRICS_COMPLETE, partial]
    assert len(by_reason[partial]) == 2, by_reason  # passes 1 and 8: two episodes
    assert len(by_reason[scaling.METRICS_COMPLETE]) == 1, by_reason  # pass 6
    assert any("pass 1:" in m for m in by_reason[partial])
