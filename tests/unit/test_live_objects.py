"""The objects `make bench-live` deploys per policy (e2e/harness/live.py), without the
cluster: the plain Deployment a KEDA user without modelscale runs, and the KEDA and HPA
objects on the token rate."""

from __future__ import annotations

from harness import live
from modelscale.api import v1alpha1

MD = {
    "apiVersion": "modelscale.dev/v1alpha1",
    "kind": "ModelDeployment",
    "metadata": {"name": "toy", "namespace": "ns"},
    "spec": {
        "model": {"name": "toy_llm", "repository": "/models", "backend": "vllm"},
        "server": {"image": "nvcr.io/nvidia/tritonserver:24.10-py3", "gpus": 1},
        "minReplicas": 1,
        "maxReplicas": 3,
        "replicas": 1,
        "scaling": {"mode": "External"},
    },
}
SCALING = live.Autoscaling(
    threshold=704.0, min_replicas=1, max_replicas=3, prometheus_url="http://p:9090"
)


def test_the_plain_deployment_is_the_same_pod_without_the_gate_or_the_operator():
    secret, dep, svc = live.plain_objects(MD, name="toy-plain", key=live.new_key())
    pod = dep["spec"]["template"]
    assert "readinessGates" not in pod["spec"]
    assert v1alpha1.WARMED_UP_CONDITION not in str(pod)
    # Nothing the operator owns or selects: no owner (garbage collection would delete it
    # with no ModelDeployment there) and none of its labels.
    for obj in (secret, dep, svc):
        assert obj["metadata"] == {
            "name": obj["metadata"]["name"],
            "namespace": "ns",
            "labels": {"app": "toy-plain"},
        }
    assert dep["spec"]["selector"] == {"matchLabels": pod["metadata"]["labels"]}
    assert svc["spec"]["selector"] == pod["metadata"]["labels"]
    # Triton's readiness probe stays, and the control key it reads exists.
    container = pod["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    ref = container["env"][0]["valueFrom"]["secretKeyRef"]
    assert ref["name"] == secret["metadata"]["name"] and ref["key"] in secret["data"]
    # Scraped like the operator's pods, so the same PromQL sees its tokens.
    assert pod["metadata"]["annotations"]["prometheus.io/scrape"] == "true"


def test_scaled_object_triggers_on_the_namespace_token_rate_at_the_threshold():
    so = live.scaled_object("toy", namespace="ns", target=live.md_target("toy"), scaling=SCALING)
    trigger = so["spec"]["triggers"][0]
    assert trigger["type"] == "prometheus"
    assert trigger["metadata"] == {
        "serverAddress": "http://p:9090",
        "query": 'sum(rate(vllm:generation_tokens_total{namespace="ns"}[1m])) or vector(0)',
        "threshold": "704",
    }
    assert so["spec"]["scaleTargetRef"]["kind"] == "ModelDeployment"
    assert (so["spec"]["minReplicaCount"], so["spec"]["maxReplicaCount"]) == (1, 3)
    # KEDA's defaults: no polling interval, no HPA behaviour of our own.
    assert "pollingInterval" not in so["spec"] and "advanced" not in so["spec"]


def test_hpa_reads_keda_metric_of_the_source_scaled_object_per_replica():
    hpa = live.hpa_on_keda_metric(
        "toy", namespace="ns", target=live.md_target("toy"), source="src", scaling=SCALING
    )
    (metric,) = hpa["spec"]["metrics"]
    assert metric["external"]["metric"] == {
        "name": "s0-prometheus",
        "selector": {"matchLabels": {"scaledobject.keda.sh/name": "src"}},
    }
    assert metric["external"]["target"] == {"type": "AverageValue", "averageValue": "704"}
    assert "behavior" not in hpa["spec"]
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (1, 3)
