"""Fixtures for the operator's end-to-end tests: the chart installed with the real helm,
the operator running from it as a pod (a real process authenticated as its
ServiceAccount), and small helpers around kubectl."""

from __future__ import annotations

import fcntl
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from harness import faultservers, operator_chart
from harness import topology as topo
from harness.kubectl import Kubectl

OPERATOR_NAMESPACE, RELEASE = operator_chart.OPERATOR_NAMESPACE, operator_chart.RELEASE
OPERATOR_LOCK = "/run/lock/modelscale-operator.lock"


@pytest.fixture(scope="session")
def kubectl(cluster: Any) -> Kubectl:
    return Kubectl(cluster.bin_dir, cluster.kubeconfig)


@pytest.fixture(scope="session")
def operator(cluster: Any, kubectl: Kubectl) -> Iterator[str]:
    """`helm install` of the chart; yields once the operator pod is Ready.

    One helm release per cluster: sessions that share the cluster take turns (a lock
    held for the session) instead of installing over each other."""
    with open(OPERATOR_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield from _installed(cluster, kubectl)


def adopt_crd(kubectl: Kubectl) -> None:
    """The chart owns the CRD (so `helm upgrade` upgrades it). Tests that applied it with
    kubectl (tests/integration) leave one Helm refuses to take over: adopt it as the chart
    README tells users moving from `kubectl apply` to Helm."""
    crd = "crd/modeldeployments.modelscale.dev"
    if kubectl.run("get", crd, check=False).returncode != 0:
        return
    kubectl.run(
        "annotate",
        crd,
        f"meta.helm.sh/release-name={RELEASE}",
        f"meta.helm.sh/release-namespace={OPERATOR_NAMESPACE}",
        "--overwrite",
    )
    kubectl.run("label", crd, "app.kubernetes.io/managed-by=Helm", "--overwrite")


def _installed(cluster: Any, kubectl: Kubectl) -> Iterator[str]:
    helm = str(cluster.bin_dir / "helm")
    base = [helm, "--kubeconfig", str(cluster.kubeconfig), "-n", OPERATOR_NAMESPACE]
    subprocess.run([*base, "uninstall", RELEASE, "--wait"], capture_output=True, check=False)
    adopt_crd(kubectl)
    proc = subprocess.run(
        [
            *base,
            *operator_chart.install_args(
                prometheus_url=cluster.prometheus_url,
                values=(
                    "logLevel=DEBUG",
                    # The real Prometheus and the fault servers standing in for a
                    # ModelDeployment's own Prometheus (test_faults_e2e).
                    "prometheus.allowedUrls={"
                    + ",".join(
                        [
                            cluster.prometheus_url,
                            *(
                                f"http://{topo.HOST_ADDRESS}:{port}"
                                for port in faultservers.FAULT_PROMETHEUS_PORTS
                            ),
                        ]
                    )
                    + "}",
                ),
            ),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=240,
    )
    if proc.returncode != 0:
        logs = kubectl.run(
            "-n", OPERATOR_NAMESPACE, "logs", "deploy/modelscale", "--tail=50", check=False
        )
        raise AssertionError(
            f"helm install failed:\n{proc.stdout}\n{proc.stderr}\n{logs.stdout}{logs.stderr}"
        )
    try:
        yield OPERATOR_NAMESPACE
    finally:
        subprocess.run(
            [*base, "uninstall", RELEASE, "--wait", "--timeout", "120s"],
            capture_output=True,
            check=False,
        )
