"""API-only pods for load benchmarks (`make bench-scale`): a pod bound to a node labelled
`modelscale.dev/api-only-node=true` runs no process. The runtime gives it an IP from a
range the host routes nowhere (`unreachable`, so a connection fails at once instead of
timing out), marks its containers ready and — since nothing could warm it — its warm-up
gate True, so the operator treats it as a warmed replica. Ready follows the kubelet's
rule (containers ready AND every readiness gate True): a gate the operator closes takes
the pod out of Ready. The nodes themselves are created by the benchmark
(`node_body`); the runtime renews their Leases and heartbeats like its own nodes'."""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import queue
import subprocess
import threading
import time
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from harness import topology as topo
from harness.kubelet import nodes
from harness.kubelet.common import now

log = logging.getLogger("harness.kubelet")

LABEL = "modelscale.dev/api-only-node"
IP_RANGE = ipaddress.ip_network("198.19.0.0/16")
GATE = "modelscale.dev/warmed-up"
# What a pod spec needs to run on API-only nodes.
TOLERATION = {"key": LABEL, "operator": "Equal", "value": "true", "effect": "NoSchedule"}
LIST_PERIOD = 5.0


def node_body(name: str, *, zone: str, gpus: int = 1000, pods: int = 2000) -> dict[str, Any]:
    """A Node object for API-only pods (the benchmark creates it; status via patch)."""
    body = nodes.node_body(topo.FakeNode(name, zone, 0))
    body["metadata"]["labels"] = {
        **body["metadata"]["labels"],
        LABEL: "true",
        "nvidia.com/gpu.count": str(gpus),
    }
    # Tainted: only pods that ask for API-only nodes land there (the operator itself, or
    # another test's pods, scheduled here would silently run no process).
    body["spec"] = {"taints": [{"key": LABEL, "value": "true", "effect": "NoSchedule"}]}
    resources = {
        "cpu": "10000",
        "memory": "10000Gi",
        "pods": str(pods),
        "nvidia.com/gpu": str(gpus),
    }
    body["status"]["capacity"] = body["status"]["allocatable"] = resources
    body["status"]["addresses"] = [{"type": "Hostname", "address": name}]
    return body


def _route(action: str) -> None:
    subprocess.run(
        ["ip", "route", action, "unreachable", str(IP_RANGE)], capture_output=True, check=False
    )


class ApiOnlyPods:
    """Status of API-only pods, written from one thread fed by the runtime's pod watch."""

    def __init__(self, core: Any, coord: Any, api: Any) -> None:
        self.core, self.coord, self.api = core, coord, api
        self.nodes: set[str] = set()
        self._listed_at = 0.0
        self._missed: dict[str, float] = {}
        self._lock = threading.Lock()
        self._ips: dict[str, str] = {}
        self._free = (str(ip) for ip in IP_RANGE.hosts())
        self._work: queue.Queue[tuple[str, dict[str, Any]]] = queue.Queue()
        self._routed = False

    def owns(self, node_name: str | None) -> bool:
        if not node_name:
            return False
        # A pod on a node not seen yet: list again, unless this name was just looked for
        # (a pod event dropped here would leave the pod Pending until its next event).
        recently_missed = time.monotonic() - self._missed.get(node_name, -1e9) <= 1.0
        if node_name not in self.nodes and not recently_missed:
            self.refresh_nodes()
            if node_name not in self.nodes:
                self._missed[node_name] = time.monotonic()
        return node_name in self.nodes

    def refresh_nodes(self) -> list[str]:
        self._listed_at = time.monotonic()
        try:
            listed = self.core.list_node(label_selector=f"{LABEL}=true")
        except ApiException as err:
            log.warning("listing API-only nodes failed: %s", err.reason)
            return sorted(self.nodes)
        self.nodes = {n.metadata.name for n in listed.items}
        if self.nodes and not self._routed:
            _route("replace")
            self._routed = True
        return sorted(self.nodes)

    def heartbeat(self, *, status: bool) -> None:
        if time.monotonic() - self._listed_at > LIST_PERIOD:
            self.refresh_nodes()
        for name in sorted(self.nodes):
            node = topo.FakeNode(name, "", 0)
            with contextlib.suppress(ApiException):
                nodes.renew_lease(self.core, self.coord, node)
                if status:
                    nodes.patch_heartbeat(self.api, self.core, node)

    def submit(self, etype: str, pod: dict[str, Any]) -> None:
        self._work.put((etype, pod))

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                etype, pod = self._work.get(timeout=0.5)
            except queue.Empty:
                continue
            try:
                self._handle(etype, pod)
            except ApiException as err:
                if err.status != 404:
                    log.warning("API-only pod %s: %s", pod["metadata"]["name"], err.reason)
            except Exception:
                log.exception("API-only pod %s", pod["metadata"]["name"])
        if self._routed:
            _route("del")

    def _handle(self, etype: str, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        uid, ns, name = meta["uid"], meta["namespace"], meta["name"]
        if etype == "DELETED":
            with self._lock:
                self._ips.pop(uid, None)
            return
        if meta.get("deletionTimestamp"):
            # No process to stop: the kubelet's final delete at once (uid-guarded).
            self.core.delete_namespaced_pod(
                name,
                ns,
                body=client.V1DeleteOptions(
                    grace_period_seconds=0, preconditions=client.V1Preconditions(uid=uid)
                ),
            )
            return
        status = self._desired(pod)
        if status is not None:
            self.core.patch_namespaced_pod_status(name, ns, {"status": status})

    def _ip(self, pod: dict[str, Any]) -> str:
        uid = pod["metadata"]["uid"]
        with self._lock:
            if uid not in self._ips:
                self._ips[uid] = pod.get("status", {}).get("podIP") or next(self._free)
            return self._ips[uid]

    def _desired(self, pod: dict[str, Any]) -> dict[str, Any] | None:
        """The status to patch, or None when the pod already shows it."""
        observed = pod.get("status") or {}
        by_type = {c.get("type"): c for c in observed.get("conditions") or ()}
        gates = [g["conditionType"] for g in pod["spec"].get("readinessGates") or ()]
        stamp = now()
        conds: dict[str, dict[str, Any]] = {}
        for ctype in ("PodScheduled", "Initialized", "ContainersReady"):
            conds[ctype] = {"type": ctype, "status": "True"}
        for gate in gates:
            if gate not in by_type:  # nothing can warm it: open once, then the operator's
                conds[gate] = {"type": gate, "status": "True", "reason": "ApiOnlyPod"}
        gate_ok = all((conds.get(g) or by_type.get(g) or {}).get("status") == "True" for g in gates)
        conds["Ready"] = {"type": "Ready", "status": "True" if gate_ok else "False"}
        ip = self._ip(pod)
        changed = (
            observed.get("phase") != "Running"
            or observed.get("podIP") != ip
            or any(by_type.get(t, {}).get("status") != c["status"] for t, c in conds.items())
        )
        if not changed:
            return None
        for c in conds.values():
            c.setdefault("lastTransitionTime", stamp)
            if by_type.get(c["type"], {}).get("status") == c["status"]:
                c["lastTransitionTime"] = by_type[c["type"]].get("lastTransitionTime", stamp)
        containers = [
            {
                "name": c["name"],
                "image": c.get("image", ""),
                "imageID": "",
                "ready": True,
                "started": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": observed.get("startTime") or stamp}},
            }
            for c in pod["spec"]["containers"]
        ]
        return {
            "phase": "Running",
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "startTime": observed.get("startTime") or stamp,
            "conditions": [
                *conds.values(),
                *(c for t, c in by_type.items() if t not in conds and t in gates),
            ],
            "containerStatuses": containers,
        }
