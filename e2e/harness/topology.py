"""Fixed layout of the local test cluster, shared by cluster-up, the pod runtime and fixtures.

Ports are fixed (documented in e2e/README.md) so a developer's shell, Prometheus and the
tests agree without passing anything around; they sit below the ephemeral port range so a
client socket never takes one. Only one local cluster per machine: netns names are global.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import pathlib

REPO = pathlib.Path(__file__).resolve().parents[2]
STATE = pathlib.Path(os.environ.get("MODELSCALE_CLUSTER_DIR", REPO / ".cluster"))
TOOLS = REPO / "e2e" / "tools"

ETCD_CLIENT_PORT = 22379
ETCD_PEER_PORT = 22380
APISERVER_PORT = 16443
PROMETHEUS_PORT = 19090
KUBELET_PORT = 10250  # on each node's InternalIP (198.18.N.1) only

# 198.18.0.0/15 is reserved for benchmarking (RFC 2544): it never collides with a real
# network, and EndpointSlice validation accepts it (it rejects loopback).
HOST_ADDRESS = "198.18.255.1"  # host side of a veth: apiserver advertise address
HOST_IFACE = "ms-host0"
POD_NETNS_PREFIX = "ms-pod-"  # one network namespace per pod: ms-pod-<uid[:8]>
TEST_RANGE = ipaddress.ip_network("198.18.0.0/15")
SERVICE_CIDR = "10.96.0.0/16"
SERVICE_IP = "10.96.0.1"

K8S_VERSION = "v1.34.4"
GPU_PRODUCT = "NVIDIA-A100-SXM4-40GB"
GPUS_PER_NODE = 4


@dataclasses.dataclass(frozen=True)
class FakeNode:
    name: str
    zone: str
    index: int  # third octet of its pod range

    @property
    def netns(self) -> str:
        return f"ms-{self.name}"

    @property
    def host_veth(self) -> str:
        return f"ms-veth-{self.name[-1]}"

    @property
    def pod_cidr(self) -> str:
        return f"198.18.{self.index}.0/24"

    @property
    def gateway(self) -> str:
        """Host side of the veth: the namespace's next hop for the test range."""
        return f"198.18.{self.index}.1"

    @property
    def internal_ip(self) -> str:
        """The node's InternalIP (pods' hostIP): the host side of its veth, where the pod
        runtime serves the kubelet API (`kubectl logs`) and which its pods can reach."""
        return self.gateway

    @property
    def netns_ip(self) -> str:
        """Namespace side of the veth."""
        return f"198.18.{self.index}.2"

    def pod_ips(self) -> list[str]:
        return [f"198.18.{self.index}.{i}" for i in range(10, 255)]


NODES = (
    FakeNode("node-a", "zone-1", 1),
    FakeNode("node-b", "zone-1", 2),
    FakeNode("node-c", "zone-2", 3),
)


def apiserver_url(*, from_pod: bool = False) -> str:
    host = HOST_ADDRESS if from_pod else "127.0.0.1"
    return f"https://{host}:{APISERVER_PORT}"


def prometheus_url() -> str:
    """Reachable from the host AND from pods (the operator queries it from a node
    namespace, as it would query a Prometheus Service), unlike 127.0.0.1."""
    return f"http://{HOST_ADDRESS}:{PROMETHEUS_PORT}"


def kubeconfig_path() -> pathlib.Path:
    return STATE / "kubeconfig"


def bin_dir() -> pathlib.Path:
    """The directory e2e/tools/build.sh fills (same derivation as the script)."""

    def version(module: str, path: str) -> str:
        for line in (TOOLS / module / "go.mod").read_text().splitlines():
            if line.startswith(f"require {path} "):
                return line.split()[2]
        raise RuntimeError(f"no 'require {path}' line in e2e/tools/{module}/go.mod")

    k8s = version("kubernetes", "k8s.io/kubernetes")
    etcd = version("etcd", "go.etcd.io/etcd/server/v3")
    helm = version("helm", "helm.sh/helm/v3")
    cache = os.environ.get("MODELSCALE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "modelscale"
    )
    return pathlib.Path(cache) / "bin" / f"k8s-{k8s}-etcd-{etcd}-helm-{helm}"
