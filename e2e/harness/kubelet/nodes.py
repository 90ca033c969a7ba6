"""The fake GPU nodes: registration, Lease renewals and node status heartbeats."""

from __future__ import annotations

import logging
import os
from typing import Any

from kubernetes.client.exceptions import ApiException

from harness import topology as topo
from harness.kubelet.common import micro_now, now

log = logging.getLogger("harness.kubelet")

NODE_STATUS_PERIOD = 20.0
LEASE_PERIOD = 5.0

# `api`, `core`, `coord` are the kubernetes client's ApiClient, CoreV1Api and
# CoordinationV1Api, typed Any for the reason given in runtime.Runtime.


def node_body(node: topo.FakeNode) -> dict[str, Any]:
    resources = {
        "cpu": "16",
        "memory": "64Gi",
        "pods": "110",
        "ephemeral-storage": "100Gi",
        "nvidia.com/gpu": str(topo.GPUS_PER_NODE),
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node.name,
            "labels": {
                "kubernetes.io/hostname": node.name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "topology.kubernetes.io/zone": node.zone,
                "nvidia.com/gpu.product": topo.GPU_PRODUCT,
                "nvidia.com/gpu.count": str(topo.GPUS_PER_NODE),
                "modelscale.dev/fake-node": "true",
            },
        },
        "spec": {"podCIDR": node.pod_cidr, "podCIDRs": [node.pod_cidr]},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "addresses": [
                {"type": "InternalIP", "address": node.internal_ip},
                {"type": "Hostname", "address": node.name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": f"modelscale-{node.name}",
                "systemUUID": f"modelscale-{node.name}",
                "bootID": f"modelscale-{node.name}",
                "kernelVersion": os.uname().release,
                "osImage": "modelscale local harness",
                "containerRuntimeVersion": "harness://0.1.0",
                "kubeletVersion": topo.K8S_VERSION,
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
            "conditions": node_conditions(),
        },
    }


def node_conditions() -> list[dict[str, Any]]:
    stamp = now()

    def cond(ctype: str, status: str, reason: str, message: str) -> dict[str, Any]:
        return {
            "type": ctype,
            "status": status,
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": stamp,
            "lastTransitionTime": stamp,
        }

    return [
        cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "enough memory"),
        cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "no disk pressure"),
        cond("PIDPressure", "False", "KubeletHasSufficientPID", "enough PIDs"),
        cond("Ready", "True", "KubeletReady", "harness pod runtime is posting ready status"),
    ]


# A node named in this directory gets no Lease renewals and no status heartbeats (a test
# sets its Ready condition False: a node that went NotReady while its pods still run).
NOT_READY_DIR = topo.STATE / "nodes-not-ready"


def held_not_ready(node: topo.FakeNode) -> bool:
    return (NOT_READY_DIR / node.name).exists()


def register(core: Any) -> None:
    for node in topo.NODES:
        body = node_body(node)
        try:
            core.create_node(body)
            log.info("registered node %s", node.name)
        except ApiException as err:
            if err.status != 409:
                raise
            core.patch_node(node.name, {"metadata": body["metadata"], "spec": body["spec"]})
        core.patch_node_status(node.name, {"status": body["status"]})


def patch_heartbeat(api: Any, core: Any, node: topo.FakeNode) -> None:
    current = core.read_node_status(node.name)
    conds = api.sanitize_for_serialization(current.status.conditions or [])
    want = {c["type"]: c for c in node_conditions()}
    for c in conds:
        c["lastHeartbeatTime"] = now()
        if c["type"] in want and c["status"] != want[c["type"]]["status"]:
            c.update(want[c["type"]])
    if {c["type"] for c in conds} != set(want):
        conds = list(want.values())
    core.patch_node_status(node.name, {"status": {"conditions": conds}})


def renew_lease(core: Any, coord: Any, node: topo.FakeNode) -> None:
    body: dict[str, Any] = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": node.name, "namespace": "kube-node-lease"},
        "spec": {
            "holderIdentity": node.name,
            "leaseDurationSeconds": 40,
            "renewTime": micro_now(),
        },
    }
    try:
        coord.patch_namespaced_lease(node.name, "kube-node-lease", {"spec": body["spec"]})
    except ApiException as err:
        if err.status != 404:
            raise
        uid = core.read_node(node.name).metadata.uid
        body["metadata"]["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Node", "name": node.name, "uid": uid}
        ]
        coord.create_namespaced_lease("kube-node-lease", body)
