"""KEDA on the local cluster (issue 14): the operator and metrics API server built from the
pinned module, installed from its release manifests, serve `external.metrics.k8s.io`
through the apiserver's aggregation layer, and the HPA controller in the real
kube-controller-manager scales a plain Deployment on a query against the real Prometheus.

Then "modelscale recommends, KEDA acts": a ModelDeployment in External mode, a ScaledObject
on its `/scale` subresource following `modelscale_autoscaler_recommended_replicas` (the
recipe in docs/keda.md), load from the repo's trace through the ready endpoints; every new
pod is still warmed and gated by the operator before it gets a request."""

from __future__ import annotations

import fcntl
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from test_autoscaling_e2e import (
    Phase,
    autoscaled,
    phased_trace,
    warmed_pods,
    watched,
)
from test_cluster import sleeper_container

from harness import loadgen, userview
from harness.cluster import keda
from harness.cluster.state import ClusterError
from harness.kubectl import Kubectl, wait_until

# `make test-keda`, not `make test`: the cold KEDA build alone would take `make test` on a
# new 2-core machine past its 45-minute budget (docs/keda.md).
pytestmark = [pytest.mark.cluster, pytest.mark.keda]

KEDA_LOCK = "/run/lock/modelscale-keda.lock"


@pytest.fixture(scope="module")
def keda_installed(cluster: Any) -> Iterator[None]:
    """KEDA installed for this module; one install per cluster (sessions take turns)."""
    with open(KEDA_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            keda.up()
        except ClusterError as err:
            pytest.fail(f"KEDA could not be installed: {err}", pytrace=False)
        yield
        keda.down()


def busybox_deployment(name: str, *, replicas: int, scraped: bool = False) -> dict[str, Any]:
    annotations = {"prometheus.io/scrape": "true", "prometheus.io/port": "9"} if scraped else {}
    template = {
        "metadata": {"labels": {"app": name}, "annotations": annotations},
        "spec": {"containers": [sleeper_container()]},
    }
    spec = {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": template}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name}, "spec": spec}


def apply_in(kubectl: Kubectl, namespace: str, obj: dict[str, Any]) -> None:
    kubectl.run("-n", namespace, "apply", "-f", "-", stdin=json.dumps(obj))


def wait_warmed(kubectl: Kubectl, namespace: str, name: str, *, count: int, timeout: float) -> None:
    wait_until(
        lambda: len(warmed_pods(kubectl, namespace, name)) == count,
        timeout=timeout,
        what=f"{count} warmed pod(s) of {name}",
    )


@pytest.mark.usefixtures("keda_installed")
def test_scaledobject_with_prometheus_trigger_scales_a_deployment(
    kubectl: Kubectl, namespace: str, prometheus_url: str
) -> None:
    # Demand a user can see in Prometheus: one scrape target per `demand` pod (they serve
    # no metrics, so `up` is 0, but each pod is one series).
    apply_in(kubectl, namespace, busybox_deployment("demand", replicas=3, scraped=True))
    apply_in(kubectl, namespace, busybox_deployment("worker", replicas=1))
    query = f'count(up{{namespace="{namespace}",pod=~"demand-.*"}}) or vector(0)'
    scaled_object = {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": "worker"},
        "spec": {
            "scaleTargetRef": {"name": "worker"},
            "pollingInterval": 2,
            "minReplicaCount": 1,
            "maxReplicaCount": 5,
            "advanced": {
                "horizontalPodAutoscalerConfig": {
                    "behavior": {"scaleDown": {"stabilizationWindowSeconds": 0}}
                }
            },
            "triggers": [
                {
                    "type": "prometheus",
                    "metadata": {"serverAddress": prometheus_url, "query": query, "threshold": "1"},
                }
            ],
        },
    }
    apply_in(kubectl, namespace, scaled_object)

    def replicas() -> int:
        d = kubectl.json("-n", namespace, "get", "deployment", "worker")
        return int(d["spec"]["replicas"])

    wait_until(
        lambda: replicas() == 3, timeout=75, what="KEDA's HPA to scale worker to 3 (3 demand pods)"
    )
    # The value came through the aggregated API: what the HPA controller reads.
    raw = kubectl.run(
        "get",
        "--raw",
        f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/s0-prometheus"
        "?labelSelector=scaledobject.keda.sh%2Fname%3Dworker",
    )
    metric = json.loads(raw.stdout)
    assert [float(item["value"]) for item in metric["items"]] == [3.0]
    so = kubectl.json("-n", namespace, "get", "scaledobject", "worker")
    assert {c["type"]: c["status"] for c in so["status"]["conditions"]}["Ready"] == "True"

    kubectl.run("-n", namespace, "scale", "deployment", "demand", "--replicas=1")
    wait_until(lambda: replicas() == 1, timeout=75, what="KEDA's HPA to scale worker back to 1")


def external(name: str, namespace: str) -> dict[str, Any]:
    """The autoscaling e2e's toy ModelDeployment, in External mode, with a per-replica
    target low enough that the trace's quiet start already asks for all three replicas."""
    body = autoscaled(name, namespace)
    spec = body["spec"]
    spec["scaling"]["mode"] = "External"
    spec["scaling"]["targets"]["tokensPerSecondPerReplica"] = 60.0
    spec["replicas"] = 1
    return body


def follow_recommendation(name: str, namespace: str, prometheus_url: str) -> dict[str, Any]:
    """The docs/keda.md recipe. `exported_namespace`: annotation-based scraping puts the
    operator pod's namespace in `namespace` (with the chart's PodMonitor it is `namespace`)."""
    query = (
        "max(modelscale_autoscaler_recommended_replicas"
        f'{{exported_namespace="{namespace}",modeldeployment="{name}"}})'
    )
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": name},
        "spec": {
            "scaleTargetRef": {
                "apiVersion": "modelscale.dev/v1alpha1",
                "kind": "ModelDeployment",
                "name": name,
            },
            "pollingInterval": 2,
            "minReplicaCount": 1,
            "maxReplicaCount": 3,
            "advanced": {
                "horizontalPodAutoscalerConfig": {
                    "behavior": {"scaleDown": {"stabilizationWindowSeconds": 0}}
                }
            },
            "triggers": [
                {
                    "type": "prometheus",
                    "metricType": "AverageValue",
                    "metadata": {"serverAddress": prometheus_url, "query": query, "threshold": "1"},
                }
            ],
        },
    }


@pytest.mark.usefixtures("keda_installed", "operator")
def test_keda_follows_the_recommendation_and_every_new_pod_is_warmed_first(
    kubectl: Kubectl,
    kube_api: Any,
    namespace: str,
    prometheus_url: str,
) -> None:
    name = "toy"
    kubectl.apply(external(name, namespace))
    wait_warmed(kubectl, namespace, name, count=1, timeout=300)
    requests, _ = phased_trace([Phase("quiet start", trace_start_s=0, wall_s=100, speedup=0.8)])
    with watched(kube_api, namespace, name) as (mon, endpoints):
        replay = loadgen.start_replay(requests, endpoints=endpoints, max_output_tokens=64)
        try:
            apply_in(kubectl, namespace, follow_recommendation(name, namespace, prometheus_url))

            def md() -> dict[str, Any]:
                return dict(
                    kubectl.json(
                        "-n", namespace, "get", "modeldeployment", name, "--show-managed-fields"
                    )
                )

            wait_until(
                lambda: md()["spec"].get("replicas") == 3,
                timeout=120,
                what="KEDA's HPA to write spec.replicas 3 through /scale",
            )
            wait_warmed(kubectl, namespace, name, count=3, timeout=120)
            time.sleep(5)  # a few requests on the new pods
        finally:
            replay.stop()
        result = replay.wait(60)
        pods = list(mon.pods.values())

    body = md()
    # The operator did not act (it never writes spec.replicas); KEDA's HPA did, via /scale.
    writers = {
        (f["manager"], f.get("subresource", ""))
        for f in body["metadata"]["managedFields"]
        if "f:replicas" in json.dumps(f.get("fieldsV1", {}))
    }
    assert ("kube-controller-manager", "scale") in writers, writers
    autoscaling = body["status"]["autoscaling"]
    assert autoscaling["recommendedReplicas"] == 3, autoscaling
    scaling = next(c for c in body["status"]["conditions"] if c["type"] == "ScalingActive")
    assert scaling["reason"] == "External" and "recommends 3" in scaling["message"], scaling
    # The gate held: no request reached a pod before its warm-up had finished, and the
    # pods KEDA added did serve some.
    assert userview.requests_before_warm_up(result.records, pods) == []
    first = min(pods, key=lambda p: p["metadata"]["creationTimestamp"])
    added_ips = {p["status"].get("podIP") for p in pods if p is not first}
    served_by_added = [r for r in result.records if r.pod_ip in added_ips]
    assert served_by_added, "no request reached the pods KEDA added"
    ok = [r for r in result.records if r.outcome == loadgen.OK]
    assert len(ok) == len(result.records), dict(loadgen.iter_outcomes(result.records))


@pytest.mark.usefixtures("keda_installed", "operator")
def test_keda_activation_brings_the_first_pod_back_from_zero_warmed(
    kubectl: Kubectl, kube_api: Any, namespace: str, prometheus_url: str
) -> None:
    name = "toy"
    body = external(name, namespace)
    body["spec"].update({"minReplicas": 0, "replicas": 0})
    kubectl.apply(body)
    # A stand-in for a gateway's queue: one Prometheus series per `demand` pod.
    apply_in(kubectl, namespace, busybox_deployment("demand", replicas=0, scraped=True))
    demand = f'count(up{{namespace="{namespace}",pod=~"demand-.*"}}) or vector(0)'
    so = follow_recommendation(name, namespace, prometheus_url)
    so["spec"].update({"minReplicaCount": 0, "maxReplicaCount": 1, "cooldownPeriod": 5})
    so["spec"]["triggers"] = [
        {
            "type": "prometheus",
            "metadata": {
                "serverAddress": prometheus_url,
                "query": demand,
                "threshold": "1",
                "activationThreshold": "0",
            },
        }
    ]
    apply_in(kubectl, namespace, so)
    time.sleep(6)  # a few polls at zero demand: KEDA keeps it at zero
    assert kubectl.json("-n", namespace, "get", "modeldeployment", name)["spec"]["replicas"] == 0
    with watched(kube_api, namespace, name) as (mon, endpoints):
        replay = loadgen.start_replay(
            phased_trace([Phase("first users", trace_start_s=0, wall_s=60, speedup=0.5)])[0],
            endpoints=endpoints,
            max_output_tokens=64,
        )
        try:
            kubectl.run("-n", namespace, "scale", "deployment", "demand", "--replicas=1")
            wait_warmed(kubectl, namespace, name, count=1, timeout=120)
            time.sleep(5)
        finally:
            replay.stop()
        result = replay.wait(60)
        pods = list(mon.pods.values())
    served = [r for r in result.records if r.outcome == loadgen.OK]
    assert served, dict(loadgen.iter_outcomes(result.records))
    # Requests sent before the pod was warm found no endpoint (a holding gateway's job);
    # none reached the pod before its warm-up finished.
    assert userview.requests_before_warm_up(result.records, pods) == []
