"""Local Kubernetes cluster without Docker: etcd, control plane, fake GPU nodes, Prometheus.

`python -m harness.cluster up|down|status|env` (PYTHONPATH=e2e); `make cluster-up` calls it.
Every process started here runs in its own session, is recorded in `.cluster/pids/` and is
stopped by `down`, which waits until each of them has exited and the fixed ports are free,
and also deletes the network namespaces, veths, the host interface and the route it made.
Needs root (network namespaces); elsewhere use e2e/kind.

Modules: `lifecycle` (up, down, session, leftovers), `components` (how each control-plane
process and the pod runtime start), `prometheus`, `network`, `certs`, `processes` (start,
find, stop and wait for recorded processes), `state` (paths, ports, shared types), `cli`.
"""

from harness.cluster.certs import CLIENTS, ensure_certs, kubeconfig_dict
from harness.cluster.cli import main
from harness.cluster.components import api_get, ensure_binaries
from harness.cluster.lifecycle import down, leftovers, locked, other_users, running, session, up
from harness.cluster.network import delete_pod_namespaces, setup_network, teardown_network
from harness.cluster.prometheus import (
    SD_FILE,
    ensure_prometheus,
    prometheus_config,
    prometheus_stopped,
    start_prometheus,
    stop_prometheus,
)
from harness.cluster.state import (
    CERTS,
    COMPONENTS,
    ENV_FILE,
    ETCD_DATA,
    FINGERPRINT,
    LOCK,
    LOGS,
    PIDS,
    PODS,
    PORTS,
    PROM_DATA,
    SESSION_STARTED,
    USERS,
    ClusterError,
    ClusterInfo,
    info,
)

__all__ = [
    "CERTS",
    "CLIENTS",
    "COMPONENTS",
    "ENV_FILE",
    "ETCD_DATA",
    "FINGERPRINT",
    "LOCK",
    "LOGS",
    "PIDS",
    "PODS",
    "PORTS",
    "PROM_DATA",
    "SD_FILE",
    "SESSION_STARTED",
    "USERS",
    "ClusterError",
    "ClusterInfo",
    "api_get",
    "delete_pod_namespaces",
    "down",
    "ensure_binaries",
    "ensure_certs",
    "ensure_prometheus",
    "info",
    "kubeconfig_dict",
    "leftovers",
    "locked",
    "main",
    "other_users",
    "prometheus_config",
    "prometheus_stopped",
    "running",
    "session",
    "setup_network",
    "start_prometheus",
    "stop_prometheus",
    "teardown_network",
    "up",
]
