"""The status the harness writes for an API-only pod (no process): Running with an IP,
the warm-up gate opened once, Ready by the kubelet's rule, nothing re-sent when shown."""

from __future__ import annotations

from typing import Any

from harness.kubelet.apionly import GATE, IP_RANGE, ApiOnlyPods


def _pod(conditions: list[dict[str, Any]] | None = None, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"uid": "u1", "namespace": "ns", "name": "p"},
        "spec": {
            "containers": [{"name": "triton", "image": "tritonserver"}],
            "readinessGates": [{"conditionType": GATE}],
        },
        "status": {"conditions": conditions or [], **status},
    }


def _by_type(status: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in status["conditions"]}


def test_a_new_pod_becomes_running_ready_and_warmed() -> None:
    status = ApiOnlyPods(None, None, None)._desired(_pod())
    assert status is not None
    assert status["phase"] == "Running"
    assert status["podIP"] in {str(ip) for ip in IP_RANGE}
    assert _by_type(status) == {
        "PodScheduled": "True",
        "Initialized": "True",
        "ContainersReady": "True",
        GATE: "True",
        "Ready": "True",
    }


def test_shown_status_is_not_sent_again_and_a_closed_gate_means_not_ready() -> None:
    pods = ApiOnlyPods(None, None, None)
    first = pods._desired(_pod())
    assert first is not None
    shown = _pod(first["conditions"], phase="Running", podIP=first["podIP"])
    assert pods._desired(shown) is None
    closed = [{**c, "status": "False"} if c["type"] == GATE else c for c in first["conditions"]]
    again = pods._desired(_pod(closed, phase="Running", podIP=first["podIP"]))
    assert again is not None
    assert _by_type(again)["Ready"] == "False"
    assert _by_type(again)[GATE] == "False"  # the operator's condition is left as it is
