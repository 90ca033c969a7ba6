"""Warm-up before traffic, end to end on the local cluster with real Triton pods.

The operator runs from the Helm chart (a real process, as its ServiceAccount); pods run a
real tritonserver with the toy LLM, and their Ready condition is computed as the kubelet
does (containers ready AND every readiness gate True). So "absent from ready endpoints"
below is what the EndpointSlice controller decided, not something we assume.
"""

from __future__ import annotations

import contextlib
import pathlib
import threading
import time
from typing import Any

import pytest
from toy_md import modeldeployment_body, pods_of, toy_model, toy_server

from harness import loadgen
from harness.kubectl import Kubectl, wait_until
from modelscale import podfacts
from modelscale.api.v1alpha1 import WarmUp
from modelscale.warmup import client, reasons

pytestmark = pytest.mark.cluster

TRACE = pathlib.Path(__file__).resolve().parents[1] / "traces" / "azure2023_conv_normalized.csv.gz"
GATE = podfacts.CONDITION_TYPE


def modeldeployment(
    name: str,
    namespace: str,
    *,
    env: dict[str, str],
    replicas: int = 1,
    warm_up: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return modeldeployment_body(
        name,
        namespace,
        {
            "model": toy_model("python"),
            "server": toy_server(env),
            "replicas": replicas,
            "minReplicas": 1,
            "maxReplicas": 3,
            "scaling": {"mode": "External"},
            "warmUp": warm_up
            or {
                "protocol": "GRPC",
                "count": 4,
                "concurrency": 1,
                "success": {"stableLastN": 3, "maxLatencyFactor": 1.5},
            },
        },
    )


def gate(pod: dict[str, Any]) -> dict[str, Any]:
    facts = podfacts.read(pod)
    return dict(facts.warmed_condition or {})


def ready_ips(kube_api: Any, ns: str, service: str) -> set[str]:
    return {e.rsplit(":", 1)[0] for e in loadgen.ready_endpoints_from_slices(kube_api, ns, service)}


def warm_time(pod: dict[str, Any]) -> float:
    """The moment the operator decided to open the gate (creation + seconds-to-warm)."""
    facts = podfacts.read(pod)
    assert facts.created is not None and facts.seconds_to_warm is not None, pod["metadata"]
    return facts.created + facts.seconds_to_warm


def watch_gate_and_endpoints(
    kubectl: Kubectl, kube_api: Any, ns: str, name: str, *, timeout: float
) -> list[tuple[bool, bool, bool]]:
    """Observe (containers ready, gate True, in ready endpoints) for the single pod until its
    gate is True and it is in the ready endpoints. Endpoints are read BEFORE the pod, so
    "ready endpoint but gate not True" cannot be an artefact of reading order (the gate
    never goes back from True)."""
    seen: list[tuple[bool, bool, bool]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ips = ready_ips(kube_api, ns, name)
        pods = pods_of(kubectl, ns, name)
        if len(pods) == 1 and pods[0]["status"].get("podIP"):
            facts = podfacts.read(pods[0])
            seen.append((facts.containers_ready, facts.warmed, facts.ip in ips))
            if facts.warmed and facts.ip in ips:
                return seen
        time.sleep(0.3)
    raise AssertionError(f"pod never warmed and ready within {timeout:.0f} s; seen {seen[-5:]}")


COLD_ENV = {"TOY_LLM_COLD_REQUESTS": "6", "TOY_LLM_COLD_PENALTY_S": "1.5"}


def test_new_pod_gets_traffic_only_after_its_warm_up(
    operator: str, kubectl: Kubectl, kube_api: Any, namespace: str
) -> None:
    kubectl.apply(modeldeployment("toy", namespace, env=COLD_ENV))
    seen = watch_gate_and_endpoints(kubectl, kube_api, namespace, "toy", timeout=300)
    # The pod was observed warming: containers ready, gate not yet True ...
    assert (True, False, False) in seen, seen
    # ... and it never was a ready endpoint before the gate opened.
    assert not [s for s in seen if s[2] and not s[1]], seen
    (pod,) = pods_of(kubectl, namespace, "toy")
    condition = gate(pod)
    assert condition["reason"] == reasons.WARMED_UP
    # The cold toy model needed more than `count` requests before latencies settled.
    requests = int(condition["message"].split("warmed up with ")[1].split()[0])
    assert requests >= 6 + 3, condition["message"]
    facts = podfacts.read(pod)
    assert facts.seconds_to_ready is not None and facts.seconds_to_warm is not None
    assert facts.seconds_to_warm >= facts.seconds_to_ready
    assert int(facts.annotations[podfacts.ANNOTATION_DELETION_COST]) >= 0
    print(
        f"\nWARM-UP pod {facts.name}: creation->containers ready {facts.seconds_to_ready:.1f} s,"
        f" creation->warmed {facts.seconds_to_warm:.1f} s; {condition['message']}"
    )


def test_no_user_request_reaches_a_pod_before_its_warm_up(
    operator: str, kubectl: Kubectl, kube_api: Any, namespace: str
) -> None:
    """Trace load through the ready endpoints (as a gateway routes) while a second pod
    starts: the new pod serves 0 requests before its warm-up finished."""
    kubectl.apply(modeldeployment("toy", namespace, env=COLD_ENV))
    wait_until(
        lambda: any(gate(p).get("status") == "True" for p in pods_of(kubectl, namespace, "toy")),
        timeout=300,
        what="the first pod warmed",
    )
    (first,) = pods_of(kubectl, namespace, "toy")
    requests = loadgen.read_trace(TRACE, duration_s=900, speedup=2.0)
    with loadgen.EndpointPoller(
        lambda: loadgen.ready_endpoints_from_slices(kube_api, namespace, "toy"), interval_s=0.3
    ) as endpoints:
        replay = loadgen.start_replay(
            requests, endpoints=endpoints, max_output_tokens=16, max_concurrency=16
        )
        try:
            kubectl.run("-n", namespace, "scale", "mdep", "toy", "--replicas=2")

            def second_pod_served() -> dict[str, Any] | None:
                for pod in pods_of(kubectl, namespace, "toy"):
                    ip = pod["status"].get("podIP")
                    if pod["metadata"]["uid"] == first["metadata"]["uid"] or not ip:
                        continue
                    served = [r for r in replay.records_so_far() if r.pod_ip == ip]
                    if gate(pod).get("status") == "True" and len(served) >= 5:
                        return pod
                return None

            second: dict[str, Any] = wait_until(
                second_pod_served, timeout=300, what="the second pod warmed and serving"
            )
        finally:
            replay.stop()
        result = replay.wait(120)
    ip = second["status"]["podIP"]
    opened = warm_time(second)
    to_second = result.served_by(ip)
    early = [r for r in to_second if r.sent_at < opened]
    assert early == [], f"{len(early)} user requests reached {ip} before its warm-up finished"
    assert [r for r in to_second if r.outcome == loadgen.OK], "the warmed pod served nothing"
    summary = result.summary()
    print(
        f"\nLOAD {summary.count} requests, {summary.ok} ok, {summary.no_endpoint} without "
        f"endpoint; to the new pod: {len(to_second)}, before warm-up: {len(early)}"
    )


def test_model_that_fails_to_load_gets_its_pod_replaced(
    operator: str, kubectl: Kubectl, namespace: str
) -> None:
    kubectl.apply(
        modeldeployment(
            "broken",
            namespace,
            env={"TOY_LLM_FAIL_LOAD": "1"},
            warm_up={"count": 2, "maxAttempts": 2, "success": {"stableLastN": 2}},
        )
    )
    first = wait_until(lambda: pods_of(kubectl, namespace, "broken"), timeout=120, what="a pod")[0]
    uid = first["metadata"]["uid"]

    def gave_up_event() -> list[dict[str, Any]]:
        events = kubectl.json("-n", namespace, "get", "events")["items"]
        return [
            e
            for e in events
            if e.get("reason") == reasons.GAVE_UP
            and e["involvedObject"]["kind"] == "ModelDeployment"
        ]

    wait_until(gave_up_event, timeout=300, what="a WarmUpGaveUp event on the ModelDeployment")

    def replaced() -> bool:
        pods = pods_of(kubectl, namespace, "broken")
        return bool(pods) and all(p["metadata"]["uid"] != uid for p in pods)

    wait_until(replaced, timeout=120, what=f"pod {first['metadata']['name']} replaced")
    (event, *_) = gave_up_event()
    assert event["type"] == "Warning"
    assert "exit" in event["message"], event["message"]
    kubectl.run("-n", namespace, "delete", "mdep", "broken", "--wait=false")


def test_warm_up_request_triton_rejects_keeps_the_pod_and_says_so(
    operator: str, kubectl: Kubectl, namespace: str
) -> None:
    """Two prompts where the model takes one: Triton answers 400 / INVALID_ARGUMENT. Every
    pod would, so the ModelDeployment says InvalidWarmUpRequest and the pod is kept (no
    endless replace loop, even with maxAttempts 1), its gate closed."""
    two = {"datatype": "BYTES", "shape": [2], "data": ["hello", "there"]}
    warm_up = {
        "protocol": "GRPC",
        "count": 2,
        "maxAttempts": 1,
        "success": {"stableLastN": 2},
        "requests": [{"inputs": {"text_input": two}}],
    }
    kubectl.apply(modeldeployment("rejected", namespace, env={}, warm_up=warm_up))

    def degraded() -> dict[str, Any] | None:
        status = kubectl.json("-n", namespace, "get", "mdep", "rejected").get("status") or {}
        conds = {c["type"]: c for c in status.get("conditions") or []}
        cond = conds.get("Degraded")
        return cond if cond and cond.get("reason") == reasons.INVALID_REQUEST else None

    cond = wait_until(degraded, timeout=300, what="Degraded=InvalidWarmUpRequest on the mdep")
    assert "text_input" in cond["message"], cond["message"]
    (pod,) = pods_of(kubectl, namespace, "rejected")
    assert gate(pod)["reason"] == reasons.INVALID_REQUEST and gate(pod)["status"] == "False"
    time.sleep(15)  # past where maxAttempts 1 would have deleted it
    (still,) = pods_of(kubectl, namespace, "rejected")
    assert still["metadata"]["uid"] == pod["metadata"]["uid"]
    events = kubectl.json("-n", namespace, "get", "events")["items"]
    assert not [e for e in events if e.get("reason") == reasons.GAVE_UP]
    kubectl.run("-n", namespace, "delete", "mdep", "rejected", "--wait=false")


def test_operator_restart_mid_warm_up_resumes_it(
    operator: str, kubectl: Kubectl, namespace: str
) -> None:
    # A long cold start (about 30 s of warm-up) so the restart lands in the middle of it.
    env = {"TOY_LLM_COLD_REQUESTS": "10", "TOY_LLM_COLD_PENALTY_S": "5"}
    kubectl.apply(modeldeployment("slow", namespace, env=env))

    def in_progress() -> bool:
        return any(
            gate(p).get("reason") == reasons.IN_PROGRESS
            for p in pods_of(kubectl, namespace, "slow")
        )

    wait_until(in_progress, timeout=300, what="a warm-up in progress")
    restarted_at = time.time()
    kubectl.run("-n", operator, "rollout", "restart", "deployment/modelscale")
    kubectl.run("-n", operator, "rollout", "status", "deployment/modelscale", "--timeout=180s")
    (pod,) = wait_until(
        lambda: [p for p in pods_of(kubectl, namespace, "slow") if gate(p).get("status") == "True"],
        timeout=300,
        what="the pod warmed after the operator restart",
    )
    condition = gate(pod)
    assert condition["reason"] == reasons.WARMED_UP
    # The gate was opened by the new operator process, after the old one was stopped.
    assert warm_time(pod) > restarted_at
    assert podfacts.read(pod).attempts == 0  # an interrupted attempt is not a failure
    print(f"\nRESTART resumed: {condition['message']}")


def test_scale_down_removes_the_least_loaded_pod_first(
    operator: str, kubectl: Kubectl, namespace: str
) -> None:
    """The newest pod would be removed first by the ReplicaSet's own ranking; with it the
    busiest, its deletion cost (kept by the operator from its request rate) keeps it."""

    def warmed(n: int) -> list[dict[str, Any]] | None:
        pods = pods_of(kubectl, namespace, "toy")
        ok = [p for p in pods if gate(p).get("status") == "True"]
        return ok if len(pods) == n and len(ok) == n else None

    kubectl.apply(modeldeployment("toy", namespace, env={}, replicas=2))
    older = wait_until(lambda: warmed(2), timeout=300, what="2 warmed pods")
    older_uids = {p["metadata"]["uid"] for p in older}
    kubectl.run("-n", namespace, "scale", "mdep", "toy", "--replicas=3")
    pods = wait_until(lambda: warmed(3), timeout=300, what="3 warmed pods")
    (newest,) = [p for p in pods if p["metadata"]["uid"] not in older_uids]
    # Keep the newest pod busy with real requests (a warm-up client with a large budget).
    stop = threading.Event()

    def keep_busy() -> None:
        with contextlib.suppress(client.StoppedError):
            client.run_warmup(
                target=client.Target(host=newest["status"]["podIP"], model="toy_llm"),
                # A load generator, not a warm-up: a budget beyond the API's bound of 10,000
                # requests per pod keeps the pod busy until the test stops it.
                settings=WarmUp.model_construct(protocol="HTTP", count=100_000, concurrency=2),
                stop=stop,
            )

    busy = threading.Thread(target=keep_busy, daemon=True)
    busy.start()
    try:

        def costs() -> dict[str, int] | None:
            now = {
                p["metadata"]["uid"]: int(
                    podfacts.read(p).annotations.get(podfacts.ANNOTATION_DELETION_COST, "-1")
                )
                for p in pods_of(kubectl, namespace, "toy")
            }
            busy_cost = now.get(newest["metadata"]["uid"], 0)
            idle = [c for uid, c in now.items() if uid in older_uids]
            return now if busy_cost > 0 and idle and all(busy_cost > c >= 0 for c in idle) else None

        seen = wait_until(costs, timeout=240, what="deletion costs that follow the load")
        kubectl.run("-n", namespace, "scale", "mdep", "toy", "--replicas=2")
        remaining = wait_until(
            lambda: (
                {p["metadata"]["uid"] for p in pods_of(kubectl, namespace, "toy")}
                if len(pods_of(kubectl, namespace, "toy")) == 2
                else None
            ),
            timeout=120,
            what="scale-down to 2 pods",
        )
    finally:
        stop.set()
        busy.join(timeout=60)
    assert newest["metadata"]["uid"] in remaining, f"busy pod removed; costs were {seen}"
    print(f"\nDELETION COST by pod uid before scale-down: {seen}")
