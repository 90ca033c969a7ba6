"""Faults on the real cluster: the apiserver restarted mid-reconcile, a Prometheus that is
too slow or answers garbage, a node gone NotReady. What a user would notice: the operator
reconnects and converges by itself; a ModelDeployment whose Prometheus misbehaves says so
in its status within a few passes and is not scaled down; the pods of a NotReady node are
replaced at once (not after the ~5 min eviction) and the replacement gets traffic only
once warmed.

The misbehaving Prometheus is a small TCP server on the host's cluster address (the
operator's pod reaches it as it reaches the apiserver), because the real Prometheus
cannot be made to dribble or to answer garbage. The pods of those ModelDeployments stay
Pending on purpose (a nodeSelector no node has): the faults are the operator's, and
Pending pods cost the shared machine nothing. The NotReady node is the pod runtime's
node with its heartbeats held and its Ready condition set False, its pods still running.

Times to recover are printed (`FAULT ...` lines) for the closing note.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import pytest
from toy_md import modeldeployment_body, pods_of, toy_model, toy_server

from harness import faultservers, loadgen
from harness import topology as topo
from harness.cluster import components, processes
from harness.kubectl import Kubectl, wait_until
from harness.kubelet import nodes
from modelscale import podfacts

pytestmark = pytest.mark.cluster

NOWHERE = {"modelscale.dev/e2e": "no-such-node"}  # keeps the pods Pending


def pending_md(name: str, namespace: str, **scaling: Any) -> dict[str, Any]:
    server = toy_server({})
    server["nodeSelector"] = NOWHERE
    return modeldeployment_body(
        name,
        namespace,
        {
            "model": toy_model("vllm"),
            "server": server,
            "replicas": 2,
            "minReplicas": 1,
            "maxReplicas": 3,
            "scaling": scaling or {"mode": "External"},
        },
    )


def md_status(kubectl: Kubectl, ns: str, name: str) -> dict[str, Any]:
    status: dict[str, Any] = kubectl.json("-n", ns, "get", "mdep", name).get("status") or {}
    return status


def deployment_replicas(kubectl: Kubectl, ns: str, name: str) -> int | None:
    got = kubectl.run(
        "-n", ns, "get", "deploy", name, "-o", "jsonpath={.spec.replicas}", check=False
    )
    return int(got.stdout) if got.returncode == 0 and got.stdout else None


def children(kubectl: Kubectl, ns: str, name: str) -> bool:
    kinds = ("deployment", "service", "poddisruptionbudget")
    return all(
        kubectl.run("-n", ns, "get", kind, name, check=False).returncode == 0 for kind in kinds
    )


class Fault(NamedTuple):
    name: str
    server: Callable[[], contextlib.AbstractContextManager[tuple[str, int]]]
    says: str


@pytest.mark.parametrize(
    "fault",
    [
        pytest.param(
            Fault(
                "slow",
                lambda: faultservers.dribbling(
                    faultservers.http_answer(b'{"status":"success","data":{"result":[]}}'),
                    every=0.8,
                    host=topo.HOST_ADDRESS,
                    port=faultservers.FAULT_PROMETHEUS_PORTS[0],
                ),
                "no complete answer within 1.25 s",
            ),
            id="slow-beyond-the-deadline",
        ),
        pytest.param(
            Fault(
                "garbage",
                lambda: faultservers.dribbling(
                    faultservers.http_answer(
                        b"<html>this is not Prometheus</html>", content_type="text/html"
                    ),
                    every=0.0,
                    host=topo.HOST_ADDRESS,
                    port=faultservers.FAULT_PROMETHEUS_PORTS[1],
                ),
                "cannot query Prometheus",
            ),
            id="answering-garbage",
        ),
    ],
)
def test_a_misbehaving_prometheus_holds_the_replicas_and_says_so(
    operator: str, kubectl: Kubectl, namespace: str, fault: Fault
) -> None:
    says = fault.says
    with fault.server() as (host, port):
        url = f"http://{host}:{port}"
        scaling = {
            "mode": "Predictive",
            "prometheus": {"url": url, "timeoutSeconds": 1},
            "scaleDown": {"stabilizationWindowSeconds": 0},
        }
        kubectl.apply(pending_md("md", namespace, mode="External"))
        wait_until(
            lambda: deployment_replicas(kubectl, namespace, "md") == 2,
            timeout=60,
            what="the Deployment at 2 replicas",
        )
        started = time.monotonic()
        kubectl.apply(pending_md("md", namespace, **scaling))

        def reported() -> dict[str, Any] | None:
            auto = md_status(kubectl, namespace, "md").get("autoscaling") or {}
            return auto if says in (auto.get("message") or "") else None

        auto = wait_until(reported, timeout=60, what=f"the status saying {says!r}")
        took = time.monotonic() - started
        assert auto["reason"] == "MetricsMissing", auto
        assert "not allowed" not in auto["message"], auto  # the fault, not the allow-list
        assert url in auto["message"]
        conditions = {c["type"]: c for c in md_status(kubectl, namespace, "md")["conditions"]}
        assert conditions["ScalingActive"]["status"] == "False"
        assert conditions["ScalingActive"]["reason"] == "MetricsUnavailable"
        time.sleep(12)  # two more passes at the chart's 5 s interval
        assert deployment_replicas(kubectl, namespace, "md") == 2, "scaled down blind"
    print(
        f"\nFAULT prometheus-{fault.name}: in the status {took:.1f} s after the switch; held at 2"
    )


def restart_apiserver() -> float:
    """Stop kube-apiserver, start it again, and return the seconds until /readyz."""
    processes.stop("kube-apiserver", grace=5.0)
    components.start_apiserver()
    started = time.monotonic()
    processes.wait(
        "kube-apiserver /readyz",
        lambda: components.api_get("/readyz", timeout=2) == "ok",
        timeout=120,
        proc="kube-apiserver",
    )
    return time.monotonic() - started


def test_the_operator_converges_after_an_apiserver_restart_mid_reconcile(
    operator: str, kubectl: Kubectl, namespace: str
) -> None:
    kubectl.apply(pending_md("before", namespace))
    wait_until(lambda: children(kubectl, namespace, "before"), timeout=60, what="children")
    # Mid-reconcile: the apiserver goes away right after the ModelDeployment is accepted.
    kubectl.apply(pending_md("during", namespace))
    down_at = time.monotonic()
    ready_after = restart_apiserver()
    wait_until(
        lambda: children(kubectl, namespace, "during"),
        timeout=120,
        what="the Deployment, Service and PDB of the ModelDeployment applied mid-restart",
    )
    converged = time.monotonic() - down_at
    # And it still acts on new changes: the watch reconnected.
    changed_at = time.monotonic()
    kubectl.run("-n", namespace, "scale", "mdep", "before", "--replicas=3")
    wait_until(
        lambda: deployment_replicas(kubectl, namespace, "before") == 3,
        timeout=120,
        what="a change after the restart reaching the Deployment",
    )
    followed = time.monotonic() - changed_at
    print(
        f"\nFAULT apiserver-restart: apiserver ready {ready_after:.1f} s after the stop; "
        f"children of the mid-restart ModelDeployment {converged:.1f} s after the stop; "
        f"a later change applied in {followed:.1f} s"
    )


def warmed_toy(name: str, namespace: str) -> dict[str, Any]:
    """A schedulable toy (real Triton pods) that one replica serves: only the lost pod
    makes it scale."""
    body = pending_md(
        name, namespace, mode="Predictive", targets={"tokensPerSecondPerReplica": 100000}
    )
    spec = body["spec"]
    del spec["replicas"]  # the operator owns them in Predictive mode
    spec["model"] = toy_model("python")
    spec["server"] = toy_server({"TOY_LLM_LOAD_DELAY_S": "0.5"})
    spec["warmUp"] = {"protocol": "GRPC", "count": 2, "concurrency": 1}
    spec["warmUp"]["success"] = {"stableLastN": 2, "maxLatencyFactor": 3}
    return body


def set_node_ready(kubectl: Kubectl, node: str, *, ready: bool) -> None:
    """Hold the node NotReady (the pod runtime stops its heartbeats) or let it recover."""
    marker = nodes.NOT_READY_DIR / node
    if ready:
        marker.unlink(missing_ok=True)
        return
    nodes.NOT_READY_DIR.mkdir(parents=True, exist_ok=True)
    marker.touch()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    condition = {
        "type": "Ready",
        "status": "False",
        "reason": "KubeletNotReady",
        "message": "e2e: the node stopped posting ready status",
        "lastHeartbeatTime": stamp,
        "lastTransitionTime": stamp,
    }
    patch = json.dumps({"status": {"conditions": [condition]}})
    kubectl.run("patch", "node", node, "--subresource=status", "--type=strategic", "-p", patch)


def test_pods_on_a_notready_node_are_replaced_early_and_warmed_before_traffic(
    operator: str, kubectl: Kubectl, kube_api: Any, namespace: str
) -> None:
    kubectl.apply(warmed_toy("toy", namespace))

    def ips() -> set[str]:
        return {
            e.rsplit(":", 1)[0]
            for e in loadgen.ready_endpoints_from_slices(kube_api, namespace, "toy")
        }

    def first_serving() -> dict[str, Any] | None:
        for pod in pods_of(kubectl, namespace, "toy"):
            facts = podfacts.read(pod)
            if facts.warmed and facts.ip in ips():
                return pod
        return None

    first = wait_until(first_serving, timeout=240, what="the first pod warmed and serving")
    node = first["spec"]["nodeName"]
    try:
        set_node_ready(kubectl, node, ready=False)
        lost_at = time.monotonic()
        wait_until(
            lambda: deployment_replicas(kubectl, namespace, "toy") == 2,
            timeout=60,
            what=f"a replacement asked for while {node} is NotReady",
        )
        asked = time.monotonic() - lost_at
        seen: list[tuple[bool, bool]] = []  # (gate True, in ready endpoints) of the new pod

        def replacement_serving() -> dict[str, Any] | None:
            ready_ips = ips()
            for pod in pods_of(kubectl, namespace, "toy"):
                if pod["metadata"]["uid"] == first["metadata"]["uid"]:
                    continue
                facts = podfacts.read(pod)
                if facts.ip:
                    seen.append((facts.warmed, facts.ip in ready_ips))
                if facts.warmed and facts.ip in ready_ips:
                    return pod
            return None

        second = wait_until(
            replacement_serving,
            timeout=240,
            what="the replacement warmed and serving",
            interval=0.3,
        )
        serving = time.monotonic() - lost_at
    finally:
        set_node_ready(kubectl, node, ready=True)
    assert second["spec"]["nodeName"] != node
    assert [s for s in seen if s[1] and not s[0]] == [], "the replacement got traffic cold"
    message = md_status(kubectl, namespace, "toy")["autoscaling"]["message"]
    print(
        f"\nFAULT node-notready ({node}): replacement asked for {asked:.1f} s after the node "
        f"went NotReady, warmed and serving after {serving:.1f} s; the status said: {message}"
    )
