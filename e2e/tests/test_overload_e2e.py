"""Overload at maxReplicas degrades by priority instead of collapsing (spec.serving), on the
local cluster with real Triton pods behind the operator's readiness gate.

The toy model serves one request at a time per instance (`TOY_LLM_EXECUTE_BLOCKS`, 20 ms
per token), two instances per pod, so what cannot run waits in Triton's own queue. Offered
load is ≈ 2.4× what the one pod at `maxReplicas: 1` can serve: half the requests
interactive (priority 1, 4 tokens), half batch (priority 2, 32 tokens, which make most of
the work). The same load runs twice through the Service's ready endpoints, first with only
`instanceCount` (same capacity, no priorities or queue policy), then with the policy (the
pod rolls). `OVERLOAD_SECONDS` lengthens each run (`make bench-overload`).

Two instances, not one: with a single busy instance Triton 2.51's dynamic batcher sometimes
takes ≈ 500 ms to hand the next request over once the instance is free (measured: bursts of
6 requests of 80 ms finished at 0.09, 0.17, 0.67, 0.75, 1.25, 1.75 s), which would
dominate the interactive tail."""

from __future__ import annotations

import os
from typing import Any

import pytest
from toy_md import modeldeployment_body, toy_model, toy_server

from harness import loadgen, overload
from harness.kubectl import Kubectl, wait_until
from modelscale import podfacts

pytestmark = pytest.mark.cluster

NAME = "toy"
SLO_S = 1.5
SECONDS = float(os.environ.get("OVERLOAD_SECONDS", "20"))
CLIENT_TIMEOUT_S = 8.0
# Per class; at 20 ms per token, 6/s x (4 + 32) tokens ≈ 4.3 s of work per second for two
# instances (measured: a pod serves ≈ 1.8 s of it per second on this machine).
CLASSES = (
    overload.ClassLoad("interactive", rate_per_s=6.0, priority=1, max_tokens=4),
    overload.ClassLoad("batch", rate_per_s=6.0, priority=2, max_tokens=32),
)
WITHOUT = {"instanceCount": 2}
SERVING = {
    "instanceCount": 2,
    "priorities": {
        "levels": 2,
        "defaultLevel": 2,
        "queues": [
            {
                "level": 2,
                "maxQueueSize": 2,
                "defaultTimeoutMicroseconds": 1_000_000,
                "timeoutAction": "REJECT",
            }
        ],
    },
}


def body(namespace: str, serving: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "model": toy_model("python"),
        "server": toy_server({"TOY_LLM_EXECUTE_BLOCKS": "1", "TOY_LLM_TOKEN_COST_S": "0.02"}),
        "replicas": 1,
        "minReplicas": 1,
        "maxReplicas": 1,
        "scaling": {"mode": "External"},
        "warmUp": {"count": 3, "concurrency": 1, "success": {"stableLastN": 2}},
        "serving": serving,
    }
    return modeldeployment_body(NAME, namespace, spec)


def one_warm_pod(kubectl: Kubectl, namespace: str, *, not_named: set[str]) -> str | None:
    items = kubectl.json("-n", namespace, "get", "pods", "-l", f"{podfacts.MD_LABEL}={NAME}")[
        "items"
    ]
    if len(items) != 1 or items[0]["metadata"]["name"] in not_named:
        return None
    facts = podfacts.read(items[0])
    return facts.name if facts.warmed else None


def offer(kube_api: Any, namespace: str) -> dict[str, overload.ClassReport]:
    fetch = lambda: loadgen.ready_endpoints_from_slices(kube_api, namespace, NAME)  # noqa: E731
    wait_until(fetch, timeout=60, what="a ready endpoint")
    with loadgen.EndpointPoller(fetch) as endpoints:
        outcomes = overload.run(
            CLASSES, endpoints=endpoints, duration_s=SECONDS, client_timeout_s=CLIENT_TIMEOUT_S
        )
    reports = {c.name: overload.report(outcomes, c.name, slo_s=SLO_S) for c in CLASSES}
    for rep in reports.values():
        print(rep.line())  # the figures, with `pytest -s`
    return reports


def test_overload_degrades_by_priority_only_with_the_policy(
    operator: str, kubectl: Kubectl, kube_api: Any, namespace: str
) -> None:
    kubectl.apply(body(namespace, WITHOUT))
    first = wait_until(
        lambda: one_warm_pod(kubectl, namespace, not_named=set()), timeout=180, what="warm pod"
    )
    print("without priorities and queue policy:")
    without = offer(kube_api, namespace)

    kubectl.apply(body(namespace, SERVING))
    wait_until(
        lambda: one_warm_pod(kubectl, namespace, not_named={first}),
        timeout=180,
        what="the pod rolled onto spec.serving and warmed",
    )
    print("with spec.serving:")
    with_policy = offer(kube_api, namespace)

    # Without a policy one FIFO queue grows without bound: every class misses.
    for rep in without.values():
        assert rep.within_slo < 0.5, rep.line()
    interactive, batch = with_policy["interactive"], with_policy["batch"]
    # With it, interactive requests are served first and stay within the SLO ...
    assert interactive.ok == interactive.requests, interactive.line()
    assert interactive.p99_ok_seconds <= SLO_S, interactive.line()
    # ... and batch requests are refused with Triton's reason instead of piling up; nothing
    # waits until the client gives up.
    assert batch.rejected > 0.3 * batch.requests, batch.line()
    assert set(batch.errors) <= {
        "Request timeout expired",
        "[request id: <id_unknown>] Exceeds maximum queue size",
    }, batch.line()
    for rep in with_policy.values():
        assert rep.client_timeouts == 0, rep.line()
        assert rep.ok + rep.rejected == rep.requests, rep.line()
