"""Prometheus file_sd targets for the pods (Debian's Prometheus lacks Kubernetes SD)."""

from __future__ import annotations

import re
from typing import Any


def _sd_name(key: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_]", "_", key)


def sd_targets(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Prometheus file_sd entries with the labels `kubernetes_sd_configs` (role pod) gives,
    so the standard relabelling applies (Debian's Prometheus lacks Kubernetes SD)."""
    out = []
    for pod in sorted(pods, key=lambda p: (p["metadata"]["namespace"], p["metadata"]["name"])):
        meta, status = pod["metadata"], pod.get("status") or {}
        ip = status.get("podIP")
        if not ip:
            continue
        ready = any(
            c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or []
        )
        labels = {
            "__meta_kubernetes_namespace": meta["namespace"],
            "__meta_kubernetes_pod_name": meta["name"],
            "__meta_kubernetes_pod_uid": meta["uid"],
            "__meta_kubernetes_pod_ip": ip,
            "__meta_kubernetes_pod_node_name": pod["spec"].get("nodeName", ""),
            "__meta_kubernetes_pod_host_ip": status.get("hostIP", ""),
            "__meta_kubernetes_pod_phase": status.get("phase", ""),
            "__meta_kubernetes_pod_ready": "true" if ready else "false",
        }
        for key, value in (meta.get("labels") or {}).items():
            labels[f"__meta_kubernetes_pod_label_{_sd_name(key)}"] = value
            labels[f"__meta_kubernetes_pod_labelpresent_{_sd_name(key)}"] = "true"
        for key, value in (meta.get("annotations") or {}).items():
            labels[f"__meta_kubernetes_pod_annotation_{_sd_name(key)}"] = value
            labels[f"__meta_kubernetes_pod_annotationpresent_{_sd_name(key)}"] = "true"
        out.append({"targets": [ip], "labels": labels})
    return out
