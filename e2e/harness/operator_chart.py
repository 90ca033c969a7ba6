"""The operator's Helm release as the e2e tests and the demo install it on the local
cluster: one release name, one namespace, one set of install flags."""

from __future__ import annotations

import pathlib

REPO = pathlib.Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "modelscale"
RELEASE = "modelscale"
OPERATOR_NAMESPACE = "modelscale-system"


def install_args(*, prometheus_url: str, values: tuple[str, ...] = ()) -> list[str]:
    """`helm install` arguments (after `helm -n OPERATOR_NAMESPACE`): the chart, waited
    for, reading `prometheus_url`, autoscaling every 5 s, plus `--set` of each of
    `values` (`key=value`)."""
    sets = [f"prometheus.url={prometheus_url}", "autoscaler.intervalSeconds=5", *values]
    args = ["install", RELEASE, str(CHART), "--create-namespace", "--wait", "--timeout", "180s"]
    for value in sets:
        args += ["--set", value]
    return args
