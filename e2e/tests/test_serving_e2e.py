"""spec.serving on the local cluster, end to end: the operator (installed by the chart)
loads each real Triton pod with the policy before warming it, the configuration the pod
runs (`/v2/models/<name>/config`) is the spec's, nobody without the ModelDeployment's key
can unload the model, and a policy change rolls the pods onto the new policy."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest
from kubernetes import client as k8s
from toy_md import modeldeployment_body, toy_model, toy_server

from harness.kubectl import Kubectl, wait_until
from modelscale import podfacts
from modelscale.api.v1alpha1 import ModelDeployment
from modelscale.resources import control
from modelscale.warmup import policy

pytestmark = pytest.mark.cluster

NAME = "toy"


def serving(max_queue_size: int) -> dict[str, Any]:
    return {
        "instanceCount": 2,
        "priorities": {
            "levels": 2,
            "defaultLevel": 2,
            "queues": [
                {"level": 1, "maxQueueSize": 0},
                {
                    "level": 2,
                    "maxQueueSize": max_queue_size,
                    "defaultTimeoutMicroseconds": 500_000,
                    "timeoutAction": "REJECT",
                },
            ],
        },
    }


def body(namespace: str, *, replicas: int, max_queue_size: int) -> dict[str, Any]:
    return modeldeployment_body(
        NAME,
        namespace,
        {
            "model": toy_model("python"),
            "server": toy_server({}),
            "replicas": replicas,
            "minReplicas": 1,
            "maxReplicas": 3,
            "scaling": {"mode": "External"},
            "warmUp": {"count": 3, "concurrency": 1, "success": {"stableLastN": 2}},
            "serving": serving(max_queue_size),
        },
    )


@pytest.fixture(scope="module")
def ns(operator: str, module_namespace: str) -> str:
    return module_namespace


def warmed_pods(kubectl: Kubectl, namespace: str, count: int) -> list[dict[str, Any]] | None:
    items: list[dict[str, Any]] = kubectl.json(
        "-n", namespace, "get", "pods", "-l", f"{podfacts.MD_LABEL}={NAME}"
    )["items"]
    live = [p for p in items if not p["metadata"].get("deletionTimestamp")]
    warm = [p for p in live if podfacts.read(p).warmed]
    return warm if len(warm) == count == len(live) else None


def http(ip: str, method: str, path: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    request = urllib.request.Request(
        f"http://{ip}:8000/v2{path}",
        method=method,
        data=b"{}" if method == "POST" else None,
        headers=headers or {},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def assert_runs_the_spec(pod: dict[str, Any], spec: dict[str, Any]) -> None:
    wanted = ModelDeployment.model_validate(spec).spec.serving
    assert wanted is not None
    status, text = http(pod["status"]["podIP"], "GET", "/models/toy_llm/config")
    assert status == 200, text
    config = json.loads(text)
    assert policy.differences(config, wanted) == [], pod["metadata"]["name"]
    level2 = config["dynamic_batching"]["priority_queue_policy"]["2"]
    queue = spec["spec"]["serving"]["priorities"]["queues"][1]
    assert int(level2["max_queue_size"]) == queue["maxQueueSize"]
    assert int(level2["default_timeout_microseconds"]) == queue["defaultTimeoutMicroseconds"]
    assert [int(g["count"]) for g in config["instance_group"]] == [2]


@pytest.fixture(scope="module")
def first(kubectl: Kubectl, ns: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    spec = body(ns, replicas=2, max_queue_size=4)
    kubectl.apply(spec)
    pods = wait_until(
        lambda: warmed_pods(kubectl, ns, 2), timeout=300, what="2 pods warmed with spec.serving"
    )
    return spec, pods


def test_every_warmed_pod_runs_the_policy_of_the_spec(
    first: tuple[dict[str, Any], list[dict[str, Any]]],
) -> None:
    spec, pods = first
    for pod in pods:
        assert_runs_the_spec(pod, spec)


def test_the_key_lives_only_in_the_secret(
    first: tuple[dict[str, Any], list[dict[str, Any]]], kube_api: Any, ns: str
) -> None:
    _, pods = first
    secret = k8s.CoreV1Api(kube_api).read_namespaced_secret(f"{NAME}-triton-control", ns)
    key = control.key_of(secret.data)
    assert key is not None
    assert secret.metadata.owner_references[0].name == NAME
    assert key not in json.dumps(pods[0]["spec"])


def test_without_the_key_nobody_can_unload_the_model(
    first: tuple[dict[str, Any], list[dict[str, Any]]],
) -> None:
    _, pods = first
    ip = pods[0]["status"]["podIP"]
    for headers in (None, {control.HEADER: "guess"}):
        status, text = http(ip, "POST", "/repository/models/toy_llm/unload", headers)
        assert status == 403, text
    assert http(ip, "GET", "/models/toy_llm/ready")[0] == 200


def test_a_policy_change_rolls_the_pods_onto_the_new_policy(
    first: tuple[dict[str, Any], list[dict[str, Any]]], kubectl: Kubectl, ns: str
) -> None:
    _, old = first
    spec = body(ns, replicas=1, max_queue_size=8)
    kubectl.apply(spec)
    old_names = {p["metadata"]["name"] for p in old}

    def rolled() -> list[dict[str, Any]] | None:
        pods = warmed_pods(kubectl, ns, 1)
        return pods if pods and pods[0]["metadata"]["name"] not in old_names else None

    (pod,) = wait_until(rolled, timeout=300, what="a new pod warmed with the changed policy")
    assert_runs_the_spec(pod, spec)
