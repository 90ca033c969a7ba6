"""Fixtures of the suites that run against the real kube-apiserver: kubectl, and the freshly
generated CRD installed once per module."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from harness.kubectl import Kubectl, wait_until
from modelscale.api import crd

CRD_NAME = "modeldeployments.modelscale.dev"


@pytest.fixture(scope="module")
def kubectl(cluster: Any) -> Kubectl:
    return Kubectl(cluster.bin_dir, cluster.kubeconfig)


@pytest.fixture(scope="module")
def installed(kubectl: Kubectl) -> Iterator[None]:
    """The freshly generated CRD, applied as `make crds` users would (server-side)."""
    kubectl.run(
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=modelscale-crd-test",
        "-f",
        "-",
        stdin=crd.render(),
    )
    # Polled rather than `kubectl wait`, which fails outright ("accessor error: <nil>") when
    # it reads the CRD before the apiserver has written any condition.
    wait_until(
        lambda: any(
            c["type"] == "Established" and c["status"] == "True"
            for c in kubectl.json("get", "crd", CRD_NAME).get("status", {}).get("conditions") or []
        ),
        timeout=60,
        what=f"CRD {CRD_NAME} Established",
    )
    yield
