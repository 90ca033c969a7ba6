"""Acceptance of the local cluster (issue 2): pinned control plane, fake GPU nodes, a pod
runtime that makes scheduled pods real processes with the kubelet's Ready semantics, and
Prometheus scraping them. Everything here talks to the real programs."""

from __future__ import annotations

import ipaddress
import json
import os
import pathlib
import subprocess
import urllib.parse
import urllib.request
from typing import Any

import numpy as np
import pytest
import tritonclient.http as httpclient
from kubernetes import client

from harness import cluster as harness_cluster
from harness import kubelet, kubelet_server
from harness import topology as topo
from harness.pytest_plugin import WaitFor

TRITON_IMAGE = os.environ.get(
    "MODELSCALE_E2E_TRITON_IMAGE", "nvcr.io/nvidia/tritonserver:24.10-py3"
)
GATE = "modelscale.dev/warmed-up"


# --- builders ----------------------------------------------------------------------------


def triton_container(*, gpus: int = 1) -> dict[str, Any]:
    return {
        "name": "triton",
        "image": TRITON_IMAGE,
        "args": ["tritonserver", "--model-repository=/models"],
        "env": [{"name": "TOY_LLM_LOAD_DELAY_S", "value": "0"}],
        "ports": [
            {"name": "http", "containerPort": 8000},
            {"name": "grpc", "containerPort": 8001},
            {"name": "metrics", "containerPort": 8002},
        ],
        "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
        "readinessProbe": {
            "httpGet": {"path": "/v2/health/ready", "port": "http"},
            "periodSeconds": 1,
        },
    }


def sleeper_container(**extra: Any) -> dict[str, Any]:
    return {"name": "main", "image": "busybox:1.36", **extra}


def pod(name: str, *, containers: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {"app": name},
            "annotations": {
                "prometheus.io/scrape": "true",
                "prometheus.io/port": "8002",
                "prometheus.io/path": "/metrics",
            },
        },
        "spec": {"containers": containers, "terminationGracePeriodSeconds": 5, **spec},
    }


def deployment(name: str, *, replicas: int, node_selector: dict[str, str]) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": node_selector,
                    "terminationGracePeriodSeconds": 5,
                    "affinity": {
                        "podAntiAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": [
                                {
                                    "labelSelector": {"matchLabels": labels},
                                    "topologyKey": "kubernetes.io/hostname",
                                }
                            ]
                        }
                    },
                    "containers": [triton_container()],
                },
            },
        },
    }


# --- helpers -----------------------------------------------------------------------------


def condition(p: client.V1Pod, ctype: str) -> client.V1PodCondition | None:
    return next((c for c in p.status.conditions or [] if c.type == ctype), None)


def is_ready(p: client.V1Pod) -> bool:
    c = condition(p, "Ready")
    return c is not None and c.status == "True"


def unschedulable(p: client.V1Pod) -> str | None:
    """The scheduler's message when it gave up on the pod, else None."""
    c = condition(p, "PodScheduled")
    if c is not None and c.status == "False" and c.reason == "Unschedulable":
        return str(c.message)
    return None


def pid_of(p: client.V1Pod) -> int:
    cid = p.status.container_statuses[0].container_id
    assert cid and cid.startswith("harness://"), cid
    return int(cid.removeprefix("harness://"))


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = pathlib.Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(") ")[1][0] != "Z"


def slice_endpoints(disc: client.DiscoveryV1Api, ns: str, service: str) -> dict[str, bool]:
    """Pod IP -> EndpointSlice `ready` condition for a Service."""
    out: dict[str, bool] = {}
    for eps in disc.list_namespaced_endpoint_slice(
        ns, label_selector=f"kubernetes.io/service-name={service}"
    ).items:
        for ep in eps.endpoints or []:
            for address in ep.addresses:
                out[address] = bool(ep.conditions and ep.conditions.ready)
    return out


def delete_and_wait_gone(
    core: client.CoreV1Api, namespace: str, p: client.V1Pod, wait_for: WaitFor, *, what: str
) -> None:
    """Delete the pod; wait until its object is gone and its process has exited."""
    pid, name = pid_of(p), p.metadata.name
    core.delete_namespaced_pod(name, namespace)

    def gone() -> bool:
        try:
            core.read_namespaced_pod(name, namespace)
        except client.ApiException as err:
            return err.status == 404
        return False

    wait_for(gone, timeout=30, what=what)
    assert not process_alive(pid)


def set_gate(core: client.CoreV1Api, ns: str, name: str, status: str) -> None:
    # What the operator's warm-up does: a strategic-merge patch of pods/status by type.
    core.patch_namespaced_pod_status(
        name, ns, {"status": {"conditions": [{"type": GATE, "status": status}]}}
    )


def prom_query(url: str, query: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(
        f"{url}/api/v1/query?query={urllib.parse.quote(query)}", timeout=5
    ) as resp:
        result: list[dict[str, Any]] = json.load(resp)["data"]["result"]
    return result


def infer_tokens(address: str, prompt: str, *, max_tokens: int) -> str:
    c = httpclient.InferenceServerClient(f"{address}:8000", network_timeout=60.0)
    try:
        text = httpclient.InferInput("text_input", [1], "BYTES")
        text.set_data_from_numpy(np.array([prompt.encode()], dtype=np.object_))
        params = httpclient.InferInput("sampling_parameters", [1], "BYTES")
        params.set_data_from_numpy(
            np.array([json.dumps({"max_tokens": max_tokens}).encode()], dtype=np.object_)
        )
        out = c.infer("toy_llm", [text, params]).as_numpy("text_output")
    finally:
        c.close()
    assert out is not None
    return bytes(out.reshape(-1)[0]).decode()


@pytest.fixture
def core(kube_api: Any) -> client.CoreV1Api:
    return client.CoreV1Api(kube_api)


# --- control plane and nodes -------------------------------------------------------------


@pytest.mark.cluster
@pytest.mark.local_runtime
def test_kubectl_version_shows_the_pinned_server(cluster: harness_cluster.ClusterInfo) -> None:
    out = subprocess.run(
        [str(cluster.bin_dir / "kubectl"), "--kubeconfig", str(cluster.kubeconfig),
         "version", "-o", "json"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert json.loads(out)["serverVersion"]["gitVersion"] == topo.K8S_VERSION


@pytest.mark.cluster
@pytest.mark.local_runtime
@pytest.mark.parametrize("node", [pytest.param(n, id=n.name) for n in topo.NODES])
def test_fake_node_is_ready_with_four_gpus(core: client.CoreV1Api, node: topo.FakeNode) -> None:
    n = core.read_node(node.name)
    ready = next(c for c in n.status.conditions if c.type == "Ready")
    assert (ready.status, n.status.allocatable["nvidia.com/gpu"]) == ("True", "4")
    assert n.metadata.labels["topology.kubernetes.io/zone"] == node.zone
    assert n.metadata.labels["kubernetes.io/hostname"] == node.name
    assert n.metadata.labels["nvidia.com/gpu.product"] == topo.GPU_PRODUCT


@pytest.mark.cluster
def test_node_heartbeats_are_leases(kube_api: Any) -> None:
    leases = client.CoordinationV1Api(kube_api).list_namespaced_lease("kube-node-lease")
    assert {lease.spec.holder_identity for lease in leases.items} >= {n.name for n in topo.NODES}


# --- scheduling --------------------------------------------------------------------------


@pytest.mark.cluster
def test_anti_affinity_spreads_triton_pods_and_a_third_replica_stays_pending(
    kube_api: Any, core: client.CoreV1Api, namespace: str, wait_for: WaitFor
) -> None:
    apps = client.AppsV1Api(kube_api)
    zone1 = {"topology.kubernetes.io/zone": "zone-1"}  # node-a and node-b only
    apps.create_namespaced_deployment(namespace, deployment("tri", replicas=2, node_selector=zone1))

    def two_ready() -> list[client.V1Pod]:
        pods = core.list_namespaced_pod(namespace, label_selector="app=tri").items
        return pods if len(pods) == 2 and all(is_ready(p) for p in pods) else []

    pods = wait_for(two_ready, timeout=120, what="2 Ready Triton pods")
    nodes = {p.spec.node_name for p in pods}
    assert len(nodes) == 2
    assert {core.read_node(n).metadata.labels["topology.kubernetes.io/zone"] for n in nodes} == {
        "zone-1"
    }

    apps.patch_namespaced_deployment_scale("tri", namespace, {"spec": {"replicas": 3}})

    def third_unschedulable() -> str | None:
        pods = core.list_namespaced_pod(namespace, label_selector="app=tri").items
        pending = [p for p in pods if not p.spec.node_name]
        return unschedulable(pending[0]) if len(pending) == 1 else None

    message = wait_for(third_unschedulable, timeout=60, what="the scheduler to give up on #3")
    assert "anti-affinity" in message


@pytest.mark.cluster
def test_pod_asking_for_five_gpus_stays_pending(
    core: client.CoreV1Api, namespace: str, wait_for: WaitFor
) -> None:
    core.create_namespaced_pod(namespace, pod("greedy", containers=[triton_container(gpus=5)]))
    message = wait_for(
        lambda: unschedulable(core.read_namespaced_pod("greedy", namespace)),
        timeout=60,
        what="the scheduler to mark the 5-GPU pod Unschedulable",
    )
    assert "Insufficient nvidia.com/gpu" in message
    assert core.read_namespaced_pod("greedy", namespace).status.phase == "Pending"


# --- readiness gates ---------------------------------------------------------------------


@pytest.mark.cluster
def test_readiness_gate_decides_ready_and_endpoints(
    kube_api: Any, core: client.CoreV1Api, namespace: str, wait_for: WaitFor
) -> None:
    disc = client.DiscoveryV1Api(kube_api)
    spec = pod(
        "gated",
        containers=[sleeper_container(ports=[{"name": "http", "containerPort": 8000}])],
        readinessGates=[{"conditionType": GATE}],
    )
    core.create_namespaced_pod(namespace, spec)
    core.create_namespaced_service(
        namespace,
        {
            "metadata": {"name": "gated"},
            "spec": {"selector": {"app": "gated"}, "ports": [{"port": 80, "targetPort": "http"}]},
        },
    )

    def running_not_ready() -> client.V1Pod | None:
        p = core.read_namespaced_pod("gated", namespace)
        cr = condition(p, "ContainersReady")
        ok = p.status.phase == "Running" and cr is not None and cr.status == "True"
        return p if ok else None

    p = wait_for(running_not_ready, timeout=30, what="gated pod Running, containers ready")
    ready = condition(p, "Ready")
    assert ready is not None
    assert (ready.status, ready.reason) == ("False", "ReadinessGatesNotReady")
    ip = p.status.pod_ip
    wait_for(
        lambda: slice_endpoints(disc, namespace, "gated").get(ip) is False,
        timeout=30,
        what="the gated pod listed as not ready in the EndpointSlice",
    )

    set_gate(core, namespace, "gated", "True")
    wait_for(lambda: is_ready(core.read_namespaced_pod("gated", namespace)), 10, "Ready=True")
    wait_for(lambda: slice_endpoints(disc, namespace, "gated").get(ip) is True, 30, "endpoint")

    set_gate(core, namespace, "gated", "False")
    wait_for(lambda: not is_ready(core.read_namespaced_pod("gated", namespace)), 10, "not Ready")
    wait_for(
        lambda: slice_endpoints(disc, namespace, "gated").get(ip) is False, 30, "endpoint removed"
    )
    # The gate condition written by "the operator" survives the runtime's own updates.
    gate = condition(core.read_namespaced_pod("gated", namespace), GATE)
    assert gate is not None
    assert gate.status == "False"


# --- the runtime's own behaviour ---------------------------------------------------------


@pytest.mark.cluster
@pytest.mark.local_runtime
def test_unknown_image_is_reported_and_never_ready(
    core: client.CoreV1Api, namespace: str, wait_for: WaitFor
) -> None:
    core.create_namespaced_pod(
        namespace, pod("mystery", containers=[{"name": "main", "image": "example.org/mystery:1"}])
    )

    def event() -> client.CoreV1Event | None:
        events = core.list_namespaced_event(namespace, field_selector="reason=ImageNotKnown")
        return events.items[0] if events.items else None

    ev = wait_for(event, timeout=30, what="an ImageNotKnown event")
    assert ev.type == "Warning"
    assert "tritonserver" in ev.message

    def waiting_reason() -> str | None:
        statuses = core.read_namespaced_pod("mystery", namespace).status.container_statuses
        return statuses[0].state.waiting.reason if statuses else None

    # The event and the status update are separate writes: wait for the status too.
    reason = wait_for(
        lambda: (r := waiting_reason()) != "ContainerCreating" and r,
        timeout=30,
        what="the container status to say why",
    )
    assert reason == "ErrImagePull"
    p = core.read_namespaced_pod("mystery", namespace)
    assert (p.status.phase, is_ready(p)) == ("Pending", False)


@pytest.mark.cluster
@pytest.mark.local_runtime
def test_dead_process_is_restarted_and_counted(
    core: client.CoreV1Api, namespace: str, wait_for: WaitFor
) -> None:
    core.create_namespaced_pod(namespace, pod("phoenix", containers=[sleeper_container()]))
    p = wait_for(
        lambda: (q := core.read_namespaced_pod("phoenix", namespace)) and is_ready(q) and q,
        timeout=30,
        what="phoenix Ready",
    )
    first = pid_of(p)
    os.kill(first, 9)

    def restarted() -> client.V1Pod | None:
        q = core.read_namespaced_pod("phoenix", namespace)
        cs = q.status.container_statuses[0]
        return q if cs.restart_count == 1 and cs.state.running and is_ready(q) else None

    q = wait_for(restarted, timeout=30, what="phoenix restarted once")
    cs = q.status.container_statuses[0]
    assert pid_of(q) != first
    assert cs.last_state.terminated.exit_code == 137


LISTENER = (
    "import http.server as h; h.HTTPServer(('', 8080), h.SimpleHTTPRequestHandler).serve_forever()"
)


@pytest.mark.local_runtime
@pytest.mark.parametrize(
    ("listens", "probe", "expect_ready", "expect_event"),
    [
        pytest.param(False, {"tcpSocket": {"port": 9}}, False, "Unhealthy", id="tcp-closed"),
        pytest.param(True, {"tcpSocket": {"port": 8080}}, True, None, id="tcp-open"),
        pytest.param(
            True, {"httpGet": {"path": "/", "port": "http"}}, True, None, id="http-named-port"
        ),
        pytest.param(
            True, {"httpGet": {"path": "/nope", "port": 8080}}, False, "Unhealthy", id="http-404"
        ),
        pytest.param(False, {"exec": {"command": ["true"]}}, False, "ProbeNotSupported", id="exec"),
    ],
)
@pytest.mark.cluster
def test_readiness_probe_decides_containers_ready(
    *,
    core: client.CoreV1Api,
    namespace: str,
    wait_for: WaitFor,
    listens: bool,
    probe: dict[str, Any],
    expect_ready: bool,
    expect_event: str | None,
) -> None:
    spec = {**probe, "periodSeconds": 1, "failureThreshold": 1}
    container = sleeper_container(readinessProbe=spec)
    if listens:  # a real HTTP server on the pod IP, port 8080 named "http"
        container.update(
            image="modelscale-operator:dev",
            command=["python", "-c", LISTENER],
            ports=[{"name": "http", "containerPort": 8080}],
        )
    core.create_namespaced_pod(namespace, pod("probed", containers=[container]))

    def settled() -> client.V1PodCondition | None:
        q = core.read_namespaced_pod("probed", namespace)
        c = condition(q, "ContainersReady")
        if q.status.phase != "Running" or c is None:
            return None
        if expect_ready:
            return c if c.status == "True" else None
        reasons = {e.reason for e in core.list_namespaced_event(namespace).items}
        return c if expect_event in reasons else None

    c = wait_for(settled, timeout=60, what=f"the probe's verdict ({expect_event or 'ready'})")
    assert (c.status == "True") is expect_ready


@pytest.mark.cluster
@pytest.mark.local_runtime
def test_failing_liveness_probe_restarts_the_container(
    core: client.CoreV1Api, namespace: str, wait_for: WaitFor
) -> None:
    probe = {"tcpSocket": {"port": 9}, "periodSeconds": 1, "failureThreshold": 2}
    core.create_namespaced_pod(
        namespace, pod("sickly", containers=[sleeper_container(livenessProbe=probe)])
    )
    wait_for(
        lambda: (
            core.read_namespaced_pod("sickly", namespace).status.container_statuses[0].restart_count
            >= 1
        ),
        timeout=60,
        what="a restart caused by the liveness probe",
    )
    reasons = {e.reason for e in core.list_namespaced_event(namespace).items}
    assert {"Unhealthy", "Killing"} <= reasons


@pytest.mark.cluster
@pytest.mark.local_runtime
def test_pod_process_is_authenticated_as_its_service_account(
    kube_api: Any, core: client.CoreV1Api, namespace: str, wait_for: WaitFor
) -> None:
    """The operator image runs with a TokenRequest token: RBAC applies to it for real."""
    rbac = client.RbacAuthorizationV1Api(kube_api)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "reader"}})
    rbac.create_namespaced_role(
        namespace,
        {
            "metadata": {"name": "pod-reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}],
        },
    )
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": "reader"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                        "name": "pod-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": namespace}],
        },
    )  # fmt: skip
    script = (
        "import os, kubernetes as k\n"
        "k.config.load_kube_config()\n"
        "v1 = k.client.CoreV1Api()\n"
        "ns = os.environ['POD_NAMESPACE']\n"
        "v1.list_namespaced_pod(ns)\n"
        "try:\n"
        "    v1.list_namespaced_secret(ns)\n"
        "    raise SystemExit(3)\n"
        "except k.client.exceptions.ApiException as e:\n"
        "    raise SystemExit(0 if e.status == 403 else 4)\n"
    )
    container = {
        "name": "main",
        "image": "ghcr.io/example/modelscale-operator:dev",
        "command": ["python", "-c", script],
        "env": [
            {
                "name": "POD_NAMESPACE",
                "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
            }
        ],
    }
    core.create_namespaced_pod(
        namespace,
        pod("whoami", containers=[container], serviceAccountName="reader", restartPolicy="Never"),
    )

    def finished() -> client.V1Pod | None:
        q = core.read_namespaced_pod("whoami", namespace)
        return q if q.status.phase in ("Succeeded", "Failed") else None

    q = wait_for(finished, timeout=60, what="the operator-image pod to finish")
    exit_code = q.status.container_statuses[0].state.terminated.exit_code
    assert (q.status.phase, exit_code) == ("Succeeded", 0), (
        "0: may list pods but not secrets; 3: could read secrets; 4: other error"
    )


# --- Triton, Prometheus, deletion --------------------------------------------------------


@pytest.mark.cluster
@pytest.mark.local_runtime
def test_triton_pod_serves_tokens_is_scraped_and_stops_on_delete(
    core: client.CoreV1Api, namespace: str, prometheus_url: str, wait_for: WaitFor
) -> None:
    core.create_namespaced_pod(namespace, pod("llm", containers=[triton_container()]))
    p = wait_for(
        lambda: (q := core.read_namespaced_pod("llm", namespace)) and is_ready(q) and q,
        timeout=120,
        what="the Triton pod Ready",
    )
    ip = p.status.pod_ip
    assert ipaddress.ip_address(ip) in topo.TEST_RANGE

    out = infer_tokens(ip, "hello there", max_tokens=8)
    assert len(out.split()) >= 8

    query = f'vllm:generation_tokens_total{{namespace="{namespace}",pod="llm"}}'
    series = wait_for(
        lambda: [s for s in prom_query(prometheus_url, query) if float(s["value"][1]) > 0],
        timeout=10,
        what=f"Prometheus to show {query} > 0",
    )
    assert series[0]["metric"]["node"] == p.spec.node_name

    # A pod on another node reaches it (the operator's warm-up does exactly this), and
    # reaches Prometheus at the URL the fixtures hand out (the operator's autoscaler).
    probe = (
        "import sys, urllib.request\n"
        f"r = urllib.request.urlopen('http://{ip}:8000/v2/health/ready', timeout=5)\n"
        f"q = urllib.request.urlopen('{prometheus_url}/-/ready', timeout=5)\n"
        "sys.exit(0 if r.status == q.status == 200 else 1)\n"
    )
    client_pod = pod(
        "peer",
        containers=[
            {"name": "main", "image": "modelscale-operator:dev", "command": ["python", "-c", probe]}
        ],
        restartPolicy="Never",
        affinity={
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "llm"}},
                     "topologyKey": "kubernetes.io/hostname"}
                ]
            }
        },
    )  # fmt: skip
    core.create_namespaced_pod(namespace, client_pod)

    def peer_done() -> client.V1Pod | None:
        q = core.read_namespaced_pod("peer", namespace)
        return q if q.status.phase in ("Succeeded", "Failed") else None

    peer = wait_for(peer_done, timeout=60, what="the peer pod on another node to finish")
    assert peer.spec.node_name != p.spec.node_name
    assert peer.status.phase == "Succeeded"

    delete_and_wait_gone(core, namespace, p, wait_for, what="the pod object deleted by the runtime")


# --- the runtime's decisions without a cluster (pure functions, fast) ---------------------


def _pod_with(*, gates: list[str], conditions: dict[str, str]) -> dict[str, Any]:
    return {
        "spec": {
            "containers": [{"name": "a"}, {"name": "b"}],
            "readinessGates": [{"conditionType": g} for g in gates],
        },
        "status": {"conditions": [{"type": t, "status": v} for t, v in conditions.items()]},
    }


@pytest.mark.parametrize(
    ("ready", "gates", "conditions", "expect"),
    [
        pytest.param((True, True), [], {}, ("True", None), id="all-ready-no-gates"),
        pytest.param(
            (True, False), [], {}, ("False", "ContainersNotReady"), id="one-container-unready"
        ),
        pytest.param(
            (True, True), [GATE], {}, ("False", "ReadinessGatesNotReady"), id="gate-absent"
        ),
        pytest.param(
            (True, True), [GATE], {GATE: "False"}, ("False", "ReadinessGatesNotReady"),
            id="gate-false",
        ),
        pytest.param((True, True), [GATE], {GATE: "True"}, ("True", None), id="gate-true"),
        pytest.param(
            (False, True), [GATE], {GATE: "True"}, ("False", "ContainersNotReady"),
            id="gate-true-container-unready",
        ),
        pytest.param(
            (True, True), [GATE, "x/y"], {GATE: "True"}, ("False", "ReadinessGatesNotReady"),
            id="second-gate-absent",
        ),
    ],
)  # fmt: skip
def test_ready_follows_the_kubelet_rule(
    ready: tuple[bool, bool],
    gates: list[str],
    conditions: dict[str, str],
    expect: tuple[str, str | None],
) -> None:

    statuses = [{"name": n, "ready": r} for n, r in zip(("a", "b"), ready, strict=True)]
    _, cond = kubelet.ready_conditions(
        pod=_pod_with(gates=gates, conditions=conditions), containers=statuses, phase="Running"
    )
    assert (cond["status"], cond["reason"]) == expect


@pytest.mark.parametrize(
    ("desired", "observed", "expect"),
    [
        pytest.param({"a": 1}, {"a": 1, "b": 2}, True, id="subset"),
        pytest.param({"a": None}, {"b": 2}, True, id="null-means-absent"),
        pytest.param({"a": None}, {"a": 1}, False, id="null-but-present"),
        pytest.param(
            {"c": [{"type": "Ready", "status": "True"}]},
            {"c": [{"type": "X", "status": "False"}, {"type": "Ready", "status": "True"}]},
            True,
            id="list-merged-by-type",
        ),
        pytest.param(
            {"c": [{"type": "Ready", "status": "True"}]},
            {"c": [{"type": "Ready", "status": "False"}]},
            False,
            id="list-item-differs",
        ),
    ],
)
def test_status_patch_is_skipped_only_when_already_applied(
    desired: Any, observed: Any, expect: bool
) -> None:

    assert kubelet.contains(desired, observed) is expect


@pytest.mark.parametrize(
    ("value", "env", "expect"),
    [
        pytest.param("--x=$(A)", {"A": "1"}, "--x=1", id="defined"),
        pytest.param("$(B)", {}, "$(B)", id="undefined-stays"),
        pytest.param("$$(A)", {"A": "1"}, "$(A)", id="escaped"),
    ],
)
def test_env_references_expand_like_kubernetes(
    value: str, env: dict[str, str], expect: str
) -> None:

    assert kubelet.expand(value, env) == expect


@pytest.mark.parametrize(
    ("kind", "outcomes", "expect"),
    [
        pytest.param("readiness", [True], True, id="readiness-one-success"),
        pytest.param("readiness", [True, False, False], True, id="readiness-below-threshold"),
        pytest.param("readiness", [True, False, False, False], False, id="readiness-3-failures"),
        pytest.param("liveness", [], True, id="liveness-starts-alive"),
    ],
)
def test_probe_thresholds(kind: str, outcomes: list[bool], expect: bool) -> None:

    p = kubelet.Prober.make(kind, {"failureThreshold": 3}, started_at=0.0)
    for ok in outcomes:
        p.record(ok)
    assert p.result is expect


def test_prometheus_targets_carry_kubernetes_sd_labels() -> None:

    pod_obj = {
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "uid": "u",
            "labels": {"modelscale.dev/modeldeployment": "md"},
            "annotations": {"prometheus.io/port": "8002"},
        },
        "spec": {"nodeName": "node-a"},
        "status": {"podIP": "198.18.1.10", "phase": "Running", "conditions": []},
    }
    unscheduled = {"metadata": {"name": "q", "namespace": "ns", "uid": "v"}, "spec": {}}
    [target] = kubelet.sd_targets([pod_obj, unscheduled])
    assert target["targets"] == ["198.18.1.10"]
    assert target["labels"]["__meta_kubernetes_pod_label_modelscale_dev_modeldeployment"] == "md"
    assert target["labels"]["__meta_kubernetes_pod_annotation_prometheus_io_port"] == "8002"
    assert target["labels"]["__meta_kubernetes_pod_phase"] == "Running"


@pytest.mark.parametrize(
    ("previous", "tail", "expect"),
    [
        pytest.param(False, None, "c\nd\n", id="current-run"),
        pytest.param(True, None, "a\nb\n", id="previous-run"),
        pytest.param(False, 1, "d\n", id="tail-1"),
        pytest.param(False, 0, "", id="tail-0"),
    ],
)
def test_container_log_selection(previous: bool, tail: int | None, expect: str) -> None:
    text = "--- t start #0: x\na\nb\n--- t start #1: x\nc\nd\n"
    assert kubelet_server.select_log(text, previous=previous, tail_lines=tail) == expect


@pytest.mark.cluster
@pytest.mark.local_runtime
def test_process_ignoring_sigterm_is_killed_after_the_grace_period(
    core: client.CoreV1Api, namespace: str, wait_for: WaitFor
) -> None:
    stubborn = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *_: print('got SIGTERM, ignoring', flush=True))\n"
        "print('ready', flush=True)\n"
        "while True: time.sleep(1)\n"
    )
    container = {"name": "main", "image": "modelscale-operator:dev",
                 "command": ["python", "-c", stubborn]}  # fmt: skip
    spec = pod("stubborn", containers=[container])
    spec["spec"]["terminationGracePeriodSeconds"] = 2
    core.create_namespaced_pod(namespace, spec)
    p = wait_for(
        lambda: (q := core.read_namespaced_pod("stubborn", namespace)) and is_ready(q) and q,
        timeout=60,
        what="the stubborn pod Ready",
    )
    gone = "the pod removed after its grace period"
    delete_and_wait_gone(core, namespace, p, wait_for, what=gone)
    log = topo.STATE / "logs" / "pods" / f"{namespace}_stubborn_main.log"
    assert "got SIGTERM, ignoring" in log.read_text()


@pytest.mark.cluster
@pytest.mark.local_runtime
def test_kubectl_logs_shows_container_output(
    cluster: harness_cluster.ClusterInfo, core: client.CoreV1Api, namespace: str, wait_for: WaitFor
) -> None:
    container = {
        "name": "main",
        "image": "modelscale-operator:dev",
        "command": ["python", "-c", "print('hello from the pod')"],
    }
    core.create_namespaced_pod(
        namespace, pod("talker", containers=[container], restartPolicy="Never")
    )
    wait_for(
        lambda: core.read_namespaced_pod("talker", namespace).status.phase == "Succeeded",
        timeout=60,
        what="the talker pod to finish",
    )
    out = subprocess.run(
        [str(cluster.bin_dir / "kubectl"), "--kubeconfig", str(cluster.kubeconfig),
         "-n", namespace, "logs", "talker"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert out == "hello from the pod\n"
