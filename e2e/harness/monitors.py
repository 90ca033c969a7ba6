"""prometheus-operator's PodMonitor and ServiceMonitor CRDs, from its Go module (the
harness builds with Go already): what the chart's monitors are checked against, both by
the unit tests (schema) and on the local cluster (the apiserver)."""

from __future__ import annotations

import json
import pathlib
import subprocess

PROMETHEUS_OPERATOR = "github.com/prometheus-operator/prometheus-operator@v0.85.0"
KINDS = {"PodMonitor": "podmonitors", "ServiceMonitor": "servicemonitors"}


def prometheus_operator_crds() -> dict[str, pathlib.Path]:
    """Kind -> the CRD's YAML file in the downloaded module (Go module proxy)."""
    proc = subprocess.run(
        ["go", "mod", "download", "-json", PROMETHEUS_OPERATOR],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        cwd="/",
    )
    info = json.loads(proc.stdout or "{}")
    if proc.returncode != 0 or "Dir" not in info:
        raise AssertionError(
            f"cannot download {PROMETHEUS_OPERATOR} with the Go module proxy: "
            f"{info.get('Error') or proc.stderr}"
        )
    crd_dir = pathlib.Path(info["Dir"]) / "example" / "prometheus-operator-crd"
    return {kind: crd_dir / f"monitoring.coreos.com_{p}.yaml" for kind, p in KINDS.items()}
