"""A small `make bench-scale` inside `make test`: 20 ModelDeployments whose pods are
API-only (the harness runs no process for them) against the chart's operator.

At steady state a scaling pass must list no pods, ModelDeployments or Deployments (it
reads kopf's watch caches; only the nodes are listed) and write no status at all (the
policy's windows do not move with the clock), post no event and read no Deployment
(a resync takes them from the watch), instead of one patch per ModelDeployment per
pass. And a deleted ModelDeployment's metric series leave
the operator's /metrics. Counts are the operator's own client counter
`modelscale_kube_requests_total{verb,resource}`."""

from __future__ import annotations

import re
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from toy_md import TRITON_IMAGE, modeldeployment_body, toy_model

from harness.kubectl import Kubectl, wait_until
from harness.kubelet import apionly

pytestmark = [pytest.mark.cluster, pytest.mark.local_runtime]

OPERATOR_NS = "modelscale-system"
LEASE = "modelscale-leader"
COUNT = 20
NODES = ("smoke-bulk-0", "smoke-bulk-1")
INTERVAL = 5.0  # the e2e install's autoscaler.intervalSeconds


def _metrics(ip: str) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://{ip}:8080/metrics", timeout=5).read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        found = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^}]*\})?) (\S+)$", line)
        if found:
            out[found.group(1)] = float(found.group(2))
    return out


def _leader_ip(kube_api: Any) -> str:
    lease = client.CoordinationV1Api(kube_api).read_namespaced_lease(LEASE, OPERATOR_NS)
    name = str(lease.spec.holder_identity or "").rsplit("_", 1)[0]
    pod = client.CoreV1Api(kube_api).read_namespaced_pod(name, OPERATOR_NS)
    return str(pod.status.pod_ip)


@pytest.fixture(scope="module")
def bulk_nodes(kube_api: Any) -> Iterator[None]:
    core = client.CoreV1Api(kube_api)
    for i, name in enumerate(NODES):
        body = apionly.node_body(name, zone=f"zone-{1 + i}", gpus=100, pods=100)
        core.create_node(body)
        core.patch_node_status(name, {"status": body["status"]})
    yield
    for name in NODES:
        core.delete_node(name)


def _is_ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


@pytest.fixture(scope="module")
def fleet(operator: str, bulk_nodes: None, kubectl: Kubectl, module_namespace: str) -> str:
    ns = module_namespace
    for i in range(COUNT):
        spec = {
            "model": toy_model("python"),
            "server": {
                "image": TRITON_IMAGE,
                "gpus": 1,
                "nodeSelector": {apionly.LABEL: "true"},
                "tolerations": [apionly.TOLERATION],
            },
            "minReplicas": 1,
            "maxReplicas": 2,
        }
        kubectl.apply(modeldeployment_body(f"md-{i}", ns, spec))

    def ready() -> bool:
        pods = kubectl.json("-n", ns, "get", "pods")["items"]
        return sum(_is_ready(p) for p in pods) == COUNT

    wait_until(ready, timeout=180, what=f"{COUNT} API-only pods Ready")
    return ns


def _delta(before: dict[str, float], after: dict[str, float], prefix: str) -> float:
    keys = {k for k in (*before, *after) if k.startswith(prefix)}
    return sum(after.get(k, 0.0) - before.get(k, 0.0) for k in keys)


def test_a_steady_pass_lists_no_pods_and_writes_no_status(fleet: str, kube_api: Any) -> None:
    ip = _leader_ip(kube_api)
    passes = "modelscale_autoscaler_loop_duration_seconds_count"
    # Steady: every ModelDeployment's status was written once after its pods were Ready.
    time.sleep(3 * INTERVAL)
    before = _metrics(ip)
    time.sleep(6 * INTERVAL)
    after = _metrics(ip)
    ran = after[passes] - before[passes]
    assert ran >= 4, f"only {ran:.0f} scaling passes in {6 * INTERVAL:.0f} s"
    requests = "modelscale_kube_requests_total{"
    for resource in ("pods", "modeldeployments", "deployments"):
        listed = _delta(before, after, f'{requests}resource="{resource}",verb="list"}}')
        assert listed == 0, f"{listed:.0f} lists of {resource} in {ran:.0f} passes"
    writes = _delta(before, after, "modelscale_status_writes_total")
    skipped = _delta(before, after, "modelscale_status_writes_skipped_total")
    # Before: one write per ModelDeployment per pass (COUNT * ran), then the learned
    # state's heartbeat every 120 s each. Nothing changes here, so nothing is written.
    assert writes == 0, f"{writes:.0f} status writes in {ran:.0f} passes of {COUNT} steady"
    assert skipped >= COUNT * (ran - 1), f"passes skipped only {skipped:.0f} unchanged statuses"
    sent = _delta(before, after, f'{requests}resource="events",verb="create"}}')
    assert sent == 0, f"{sent:.0f} events created in {ran:.0f} steady passes"
    # The resync applies from the watch's copy of each Deployment and reads it only after
    # a 409 (a controller's late status write moved its version): a read now and then, not
    # one per ModelDeployment per pass as before.
    reads = _delta(before, after, f'{requests}resource="deployments",verb="get"}}')
    assert reads < COUNT, f"{reads:.0f} Deployment reads in {ran:.0f} passes of {COUNT}"


def test_a_deleted_modeldeployments_series_leave_metrics(
    fleet: str, kube_api: Any, kubectl: Kubectl
) -> None:
    ip = _leader_ip(kube_api)
    label = f'modeldeployment="md-0",namespace="{fleet}"'

    def series() -> list[str]:
        return [k for k in _metrics(ip) if label in k]

    wait_until(lambda: bool(series()), timeout=30, what="md-0's series in /metrics")
    kubectl.run("-n", fleet, "delete", "mdep", "md-0", "--wait=true")
    wait_until(lambda: not series(), timeout=4 * INTERVAL, what="md-0's series gone")
    assert any('modeldeployment="md-1"' in k for k in _metrics(ip))
