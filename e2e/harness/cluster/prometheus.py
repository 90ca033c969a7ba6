"""Prometheus for the cluster: its scrape configuration, start and stop."""

from __future__ import annotations

import contextlib
import shutil
import urllib.request
from collections.abc import Iterator
from typing import Any

import yaml

from harness import topology as topo
from harness.cluster.processes import recorded_pid, start, stop, wait
from harness.cluster.state import PROM_DATA, ClusterError


def ensure_prometheus() -> str:
    path = shutil.which("prometheus")
    if path is None:
        raise ClusterError(
            "prometheus is not installed: run `make prometheus-install` "
            "(apt-get install prometheus; it starts no service)"
        )
    return path


SD_FILE = topo.STATE / "prometheus-sd" / "pods.json"


def prometheus_config(*, kubernetes_sd_kubeconfig: str | None = None) -> dict[str, Any]:
    """Scrape every Running pod annotated `prometheus.io/scrape: "true"` each second.

    Debian's prometheus 2.42 is built without `kubernetes_sd_configs` (its Go client
    dependencies are not packaged), so the pod runtime writes the pods it sees on the
    API to a file_sd file with the same `__meta_kubernetes_pod_*` labels the Kubernetes
    SD would produce; the relabelling below is the standard one and works unchanged
    with `kubernetes_sd_configs: [{role: pod}]` on a real cluster (e2e/kind)."""
    relabel: list[dict[str, Any]] = [
        {
            "source_labels": ["__meta_kubernetes_pod_annotation_prometheus_io_scrape"],
            "action": "keep",
            "regex": "true",
        },
        {"source_labels": ["__meta_kubernetes_pod_phase"], "action": "keep", "regex": "Running"},
        {
            "source_labels": ["__address__", "__meta_kubernetes_pod_annotation_prometheus_io_port"],
            "action": "replace",
            "regex": r"([^:]+)(?::\d+)?;(\d+)",
            "replacement": "$1:$2",
            "target_label": "__address__",
        },
        {
            "source_labels": ["__meta_kubernetes_pod_annotation_prometheus_io_path"],
            "action": "replace",
            "regex": "(.+)",
            "target_label": "__metrics_path__",
        },
        {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
        {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
        {"source_labels": ["__meta_kubernetes_pod_node_name"], "target_label": "node"},
        {
            "source_labels": ["__meta_kubernetes_pod_label_modelscale_dev_modeldeployment"],
            "target_label": "modeldeployment",
        },
    ]
    sd: dict[str, Any] = {"file_sd_configs": [{"files": [str(SD_FILE)], "refresh_interval": "5s"}]}
    if kubernetes_sd_kubeconfig is not None:  # an upstream Prometheus (e2e/kind)
        sd = {
            "kubernetes_sd_configs": [{"role": "pod", "kubeconfig_file": kubernetes_sd_kubeconfig}]
        }
    return {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [{"job_name": "kubernetes-pods", **sd, "relabel_configs": relabel}],
    }


def start_prometheus() -> None:
    """Start Prometheus (idempotent) and wait until it is ready."""
    if recorded_pid("prometheus") is not None:
        return
    binary = ensure_prometheus()
    PROM_DATA.mkdir(parents=True, exist_ok=True)
    SD_FILE.parent.mkdir(parents=True, exist_ok=True)
    if not SD_FILE.exists():
        SD_FILE.write_text("[]\n")
    cfg = topo.STATE / "prometheus.yml"
    cfg.write_text(yaml.safe_dump(prometheus_config(), sort_keys=False))
    start(
        "prometheus",
        [
            binary,
            f"--config.file={cfg}",
            f"--storage.tsdb.path={PROM_DATA}",
            f"--web.listen-address={topo.HOST_ADDRESS}:{topo.PROMETHEUS_PORT}",
            "--web.enable-lifecycle",
            "--storage.tsdb.retention.time=1d",
            "--log.level=warn",
        ],
    )
    wait("Prometheus /-/ready", _prometheus_ready, timeout=30, proc="prometheus")


def stop_prometheus() -> None:
    """Stop Prometheus (for tests of 'metrics source gone'); its data stays. It is shared
    by every session using the cluster: restart it promptly (`prometheus_stopped`)."""
    stop("prometheus")


@contextlib.contextmanager
def prometheus_stopped() -> Iterator[None]:
    """Prometheus is down inside the block and ready again after it."""
    stop_prometheus()
    try:
        yield
    finally:
        start_prometheus()


def _prometheus_ready() -> bool:
    with urllib.request.urlopen(topo.prometheus_url() + "/-/ready", timeout=1) as resp:
        return bool(resp.status == 200)
