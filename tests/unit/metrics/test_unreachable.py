"""Prometheus that cannot be reached is told apart from one that answers without samples:
the MetricsMissing message names the URL and the error, per ModelDeployment."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from modelscale import podfacts
from modelscale.api.v1alpha1 import ModelDeployment
from modelscale.control.decide import decide
from modelscale.metrics import batch, groups
from modelscale.metrics.promql import Signals
from modelscale.podfacts import PodFacts

NOW = 1_800_000_000.0


def md(name: str, **scaling: Any) -> ModelDeployment:
    return ModelDeployment.model_validate(
        {
            "metadata": {"name": name, "namespace": "llm"},
            "spec": {"model": {"name": "m", "repository": "s3://b"}, "scaling": scaling},
        }
    )


def pod(name: str, owner: str) -> PodFacts:
    conditions = [{"type": t, "status": "True"} for t in ("Ready", podfacts.CONDITION_TYPE)]
    meta = {"name": name, "namespace": "llm", "uid": name, "labels": {podfacts.MD_LABEL: owner}}
    return podfacts.read({"metadata": meta, "status": {"conditions": conditions}})


def closed_port() -> int:
    """A local port nothing listens on: connecting is refused for real."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def test_an_unreachable_prometheus_is_recorded_per_modeldeployment_with_url() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    other = "http://127.0.0.1:1"
    mds = [md("a"), md("b"), md("c", prometheus={"url": other})]
    pods = {("llm", m.name): [pod(f"{m.name}-0", m.name)] for m in mds}
    got = batch.fetch(groups.plan(mds, pods_by_md=pods, default_url=url), namespaces=(), now=NOW)
    assert set(got.unreachable) == {("llm", "a"), ("llm", "b"), ("llm", "c")}
    assert got.unreachable[("llm", "a")].startswith(f"cannot query Prometheus at {url}: ")
    assert got.unreachable[("llm", "c")].startswith(f"cannot query Prometheus at {other}: ")
    assert got.errors == 2 and not got.signals


@pytest.mark.parametrize(
    ("metrics_error", "message"),
    [
        pytest.param(
            "cannot query Prometheus at http://p:9090: connection refused",
            "cannot query Prometheus at http://p:9090: connection refused",
            id="unreachable",
        ),
        pytest.param(
            None,
            "Prometheus answered, but has no token-rate sample for this ModelDeployment's "
            "pods (are they scraped?)",
            id="reachable-no-samples",
        ),
    ],
)
def test_metrics_missing_says_which(metrics_error: str | None, message: str) -> None:
    m = md("a")
    d = decide(
        m,
        signals=Signals(),
        pods=[pod("a-0", "a")],
        current=1,
        now=NOW,
        metrics_error=metrics_error,
    )
    assert d.recommendation.reason == "MetricsMissing"
    assert d.recommendation.message.startswith(message + "; holding 1 replicas")
