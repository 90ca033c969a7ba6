"""Where the cluster keeps its state, its fixed ports and components, and the shared types."""

from __future__ import annotations

import dataclasses
import pathlib
import sys

from harness import topology as topo

CERTS = topo.STATE / "certs"
PIDS = topo.STATE / "pids"
LOGS = topo.STATE / "logs"
ETCD_DATA = topo.STATE / "etcd"
PROM_DATA = topo.STATE / "prometheus"
PODS = topo.STATE / "pods"
ENV_FILE = topo.STATE / "env"
LOCK = pathlib.Path("/run/lock/modelscale-cluster.lock")
FINGERPRINT = topo.STATE / "harness-version"
SESSION_STARTED = topo.STATE / "started-by-pytest"  # absent when `make cluster-up` did it
USERS = topo.STATE / "users"  # one file per pytest session using the cluster (its pid)
PORTS = (topo.ETCD_CLIENT_PORT, topo.ETCD_PEER_PORT, topo.APISERVER_PORT, topo.PROMETHEUS_PORT)

# Stop order: the pod runtime first (it stops pod processes while the apiserver still
# answers), etcd last.
COMPONENTS = (
    "kubelet",
    "prometheus",
    "kube-scheduler",
    "kube-controller-manager",
    "kube-apiserver",
    "etcd",
)


class ClusterError(RuntimeError):
    """The cluster cannot be started; the message says what to do."""


@dataclasses.dataclass(frozen=True)
class ClusterInfo:
    kubeconfig: pathlib.Path
    prometheus_url: str
    apiserver_url: str
    state_dir: pathlib.Path
    bin_dir: pathlib.Path


def info() -> ClusterInfo:
    return ClusterInfo(
        kubeconfig=topo.kubeconfig_path(),
        prometheus_url=topo.prometheus_url(),
        apiserver_url=topo.apiserver_url(),
        state_dir=topo.STATE,
        bin_dir=topo.bin_dir(),
    )


def log(msg: str) -> None:
    print(f"[cluster] {msg}", file=sys.stderr, flush=True)
