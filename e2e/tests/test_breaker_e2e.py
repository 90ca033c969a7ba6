"""The circuit breaker on the local cluster: one pod of three starts failing (the toy
model's failure switch, sent to that pod only), the operator closes its readiness gate from
Prometheus's per-pod signals, so it leaves the Service's ready endpoints within seconds and
clients see no more errors from it; healed, it is warmed up again (half-open) and comes
back. The figures (ejection and recovery seconds) are printed with `pytest -s`."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import numpy as np
import pytest
import tritonclient.http as httpclient
from toy_md import modeldeployment_body, toy_model, toy_server
from tritonclient.utils import InferenceServerException

from harness import loadgen
from harness.kubectl import Kubectl, wait_until
from modelscale import podfacts
from modelscale.control import breaker

pytestmark = pytest.mark.cluster

NAME = "toy"
# The toy's own failure counter: Triton 2.51 counts its error responses as successes (so
# an all-failing pod shows failed / (failed + success) = 0.5).
BREAKER = {
    "windowSeconds": 10,
    "probeAfterSeconds": 10,
    "minRequestRate": 0.2,
    "failureRatio": 0.3,
    "failureCounter": "toy_llm:request_failures_total",
}


def body(namespace: str) -> dict[str, Any]:
    return modeldeployment_body(
        NAME,
        namespace,
        {
            "model": toy_model("python"),
            "server": toy_server({}),
            "replicas": 3,
            "minReplicas": 1,
            "maxReplicas": 3,
            "scaling": {"mode": "External"},
            "warmUp": {"count": 3, "concurrency": 1, "success": {"stableLastN": 2}},
            "serving": {"circuitBreaker": BREAKER},
        },
    )


def infer(url: str, params: dict[str, Any]) -> None:
    client = httpclient.InferenceServerClient(url, network_timeout=10)
    try:
        text = httpclient.InferInput("text_input", [1], "BYTES")
        text.set_data_from_numpy(np.array([b"hello"], dtype=np.object_))
        sampling = httpclient.InferInput("sampling_parameters", [1], "BYTES")
        sampling.set_data_from_numpy(np.array([json.dumps(params).encode()], dtype=np.object_))
        client.infer("toy_llm", [text, sampling])
    finally:
        client.close()


class Traffic:
    """Requests through the ready endpoints, round-robin, ~10/s; every outcome recorded."""

    def __init__(self, endpoints: loadgen.EndpointPoller) -> None:
        self.endpoints = endpoints
        self.records: list[tuple[float, str, bool]] = []  # (time, endpoint, ok)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        turn = 0
        while not self._stop.is_set():
            found = sorted(self.endpoints())
            if found:
                url = found[turn % len(found)]
                turn += 1
                try:
                    infer(url, {"max_tokens": 4})
                    ok = True
                except InferenceServerException:
                    ok = False
                self.records.append((time.monotonic(), url.rsplit(":", 1)[0], ok))
            self._stop.wait(0.1)

    def __enter__(self) -> Traffic:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=15)


def test_a_failing_pod_is_ejected_and_comes_back_when_healed(
    operator: str, kubectl: Kubectl, kube_api: Any, namespace: str
) -> None:
    kubectl.apply(body(namespace))
    fetch = lambda: loadgen.ready_endpoints_from_slices(kube_api, namespace, NAME)  # noqa: E731
    wait_until(lambda: len(fetch()) == 3, timeout=240, what="3 warmed pods in the endpoints")
    with loadgen.EndpointPoller(fetch, interval_s=0.2) as endpoints, Traffic(endpoints) as traffic:
        time.sleep(12)  # a window of healthy traffic on every pod
        sick = sorted(endpoints())[0]
        sick_ip = sick.rsplit(":", 1)[0]
        infer(sick, {"toy_fail": True})
        switched = time.monotonic()
        wait_until(lambda: sick not in endpoints(), timeout=60, what="the sick pod ejected")
        ejected = time.monotonic()
        print(f"ejected {ejected - switched:.1f} s after its requests started failing")
        infer(sick, {"toy_fail": False})  # healed; the operator probes it after 10 s
        time.sleep(3)  # endpoint propagation to this client's poller
        quiet_from = time.monotonic()
        wait_until(
            lambda: sick in endpoints(), timeout=90, what="the healed pod back", interval=0.1
        )
        back = time.monotonic()
        print(f"back {back - ejected:.1f} s after its ejection (probe after 10 s)")
        time.sleep(3)
    pods = kubectl.json("-n", namespace, "get", "pods", "-l", f"{podfacts.MD_LABEL}={NAME}")
    assert len(pods["items"]) == 3  # healed, not replaced
    events = kubectl.json("-n", namespace, "get", "events")["items"]
    reasons = {e["reason"] for e in events if e["involvedObject"]["kind"] == "Pod"}
    assert breaker.FAILING in reasons, reasons
    assert ejected - switched < 30
    # After the ejection reached the endpoints, no client saw an error from the sick pod.
    after = [r for r in traffic.records if quiet_from <= r[0] <= back]
    assert after and all(ok for _, _, ok in after), [r for r in after if not r[2]][:5]
    # ... and none reached it until it was back: the traffic's own poller (0.2 s) may see it
    # return a moment before this test's wait does, so that moment is not counted.
    assert not [r for r in after if r[1] == sick_ip and r[0] < back - 0.5]
    # The other pods served throughout, and the healed pod serves again.
    assert any(ip == sick_ip and ok for t, ip, ok in traffic.records if t > back)
