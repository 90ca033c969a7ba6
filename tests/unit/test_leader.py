"""Leader election decisions without a cluster: when a lease still lets a replica act,
which durations are refused (and how the command line says so), what the fence refuses,
the gate patch that carries its bookkeeping, and the bounded retry of the gate write.
The election against a real apiserver: tests/integration/test_leader_lease.py."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from modelscale import leader, podfacts
from modelscale.api.v1alpha1 import Condition
from modelscale.commands import run
from modelscale.kube import lease, pods
from modelscale.warmup import gate


@pytest.mark.parametrize(
    ("renewed_at", "now", "valid"),
    [
        pytest.param(None, 100.0, False, id="never-renewed"),
        pytest.param(100.0, 100.0, True, id="just-renewed"),
        pytest.param(100.0, 105.9, True, id="inside-deadline"),
        pytest.param(100.0, 106.0, False, id="at-deadline"),
        pytest.param(100.0, 99.0, False, id="clock-went-back"),
    ],
)
def test_lease_valid_until_the_renew_deadline(
    renewed_at: float | None, now: float, valid: bool
) -> None:
    assert leader.lease_valid(renewed_at=renewed_at, now=now, renew_deadline=6.0) is valid


def settings(**kw: Any) -> leader.ElectionSettings:
    return leader.ElectionSettings(lease_name="l", namespace="ns", identity="me", **kw)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        pytest.param({}, None, id="defaults"),
        pytest.param(
            {"retry_period": 0.5}, "--leader-retry-period must be at least 1 s", id="retry"
        ),
        pytest.param(
            {"renew_deadline": 2.0, "retry_period": 2.0},
            "--leader-renew-deadline (2 s) must exceed 1.2 × --leader-retry-period (2 s)",
            id="deadline-vs-retry",
        ),
        pytest.param(
            {"lease_duration": 6, "renew_deadline": 6.0},
            "--leader-lease-duration (6 s) must exceed --leader-renew-deadline (6 s)",
            id="lease-vs-deadline",
        ),
    ],
)
def test_bad_durations_are_refused_with_the_flag_to_fix(
    kw: dict[str, Any], message: str | None
) -> None:
    problem = leader.settings_problem(settings(**kw))
    assert problem == message or (message is not None and problem and problem.startswith(message))


def test_run_refuses_bad_durations_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        run.parse_args(
            ["--leader-election", "--leader-lease-namespace=x", "--leader-lease-duration=5"]
        )
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--leader-lease-duration (5 s) must exceed --leader-renew-deadline (6 s)" in err


def test_run_without_a_lease_namespace_says_what_to_set(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    with pytest.raises(SystemExit):
        run.parse_args(["--leader-election", "--leader-lease-namespace="])
    assert "set it (or POD_NAMESPACE)" in capsys.readouterr().err


def test_identities_differ_per_process_start() -> None:
    one, two = leader.identity(pod_name="op-0"), leader.identity(pod_name="op-0")
    assert one != two and one.startswith("op-0_") and two.startswith("op-0_")


def test_standalone_always_holds() -> None:
    assert leader.Leadership.standalone().holds()


def test_the_fence_refuses_writes_before_they_leave() -> None:
    """No server needed: a refused write never opens a connection (the host is unroutable)."""
    fenced = lease.fence_writes(client.ApiClient(), fence=lambda: False)
    fenced.configuration.host = "https://192.0.2.1:1"
    with pytest.raises(lease.NotLeaderError, match=r"PATCH .*/pods/p/status: this replica"):
        client.CoreV1Api(fenced).patch_namespaced_pod_status("p", "ns", {"status": {}})


def test_gate_patch_carries_its_annotations() -> None:
    cond = Condition(type=podfacts.CONDITION_TYPE, status="True", reason="WarmedUp", message="m")
    patch = gate.status_patch(
        cond, uid="u1", annotations={podfacts.ANNOTATION_WARMED_RESTARTS: "2", "gone": None}
    )
    assert patch["metadata"] == {
        "uid": "u1",
        "annotations": {podfacts.ANNOTATION_WARMED_RESTARTS: "2", "gone": None},
    }
    assert patch["status"]["conditions"][0]["status"] == "True"


def _failing_then_ok(statuses: list[int], calls: list[int]) -> Any:
    """Failure injection: the apiserver answering 429/5xx on command is not something the
    real one does."""

    def patch(self: Any, name: str, namespace: str, body: Any, **_: Any) -> None:
        calls.append(1)
        if statuses:
            raise ApiException(status=statuses.pop(0), reason="injected")

    return patch


@pytest.mark.parametrize(
    ("statuses", "retry_for", "raises", "calls"),
    [
        pytest.param([429, 503], 5.0, None, 3, id="retried-until-it-lands"),
        pytest.param([503], 0.0, 503, 1, id="no-retry-without-a-budget"),
        pytest.param([404], 5.0, 404, 1, id="not-retriable"),
        pytest.param([500] * 50, 0.6, 500, None, id="bounded-by-the-deadline"),
    ],
)
def test_gate_write_retries_overload_within_its_deadline(
    monkeypatch: pytest.MonkeyPatch,
    statuses: list[int],
    retry_for: float,
    raises: int | None,
    calls: int | None,
) -> None:
    made: list[int] = []
    monkeypatch.setattr(
        client.CoreV1Api, "patch_namespaced_pod_status", _failing_then_ok(statuses, made)
    )
    cond = Condition(type=podfacts.CONDITION_TYPE, status="True", reason="WarmedUp", message="m")
    kwargs: dict[str, Any] = {"namespace": "ns", "name": "p", "uid": "u"}
    kwargs["change"] = gate.GateChange(cond)
    if raises is None:
        pods.patch_condition(client.ApiClient(), retry_for=retry_for, **kwargs)
    else:
        with pytest.raises(ApiException) as err:
            pods.patch_condition(client.ApiClient(), retry_for=retry_for, **kwargs)
        assert err.value.status == raises
    if calls is not None:
        assert len(made) == calls
    else:
        assert 2 <= len(made) <= 5  # 0.25 + 0.5 s of backoff inside a 0.6 s budget
