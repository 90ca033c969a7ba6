"""The client-side rate limit: a burst goes out at once, then `qps` a second."""

from __future__ import annotations

import pytest

from modelscale.kube.client import TokenBucket, request_kind


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_burst_then_qps() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=10, burst=5, clock=clock, sleep=clock.sleep)
    waits = [bucket.take() for _ in range(25)]
    assert waits[:5] == [0.0] * 5
    # 20 more requests after the burst take 2 s at 10 a second.
    assert clock.now == pytest.approx(2.0)
    assert all(w == pytest.approx(0.1) for w in waits[5:])


def test_tokens_refill_while_idle_but_not_beyond_burst() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=2, burst=3, clock=clock, sleep=clock.sleep)
    for _ in range(3):
        bucket.take()
    clock.now += 100.0  # idle for long: the bucket holds `burst`, not 200 tokens
    waits = [bucket.take() for _ in range(4)]
    assert waits[:3] == [0.0] * 3
    assert waits[3] == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("qps", "burst", "says"),
    [
        pytest.param(0.0, 1, "--kube-qps", id="zero-qps"),
        pytest.param(float("nan"), 1, "--kube-qps", id="nan-qps"),
        pytest.param(5.0, 0, "--kube-burst", id="zero-burst"),
    ],
)
def test_bad_settings_say_which_flag(qps: float, burst: int, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        TokenBucket(qps=qps, burst=burst)


@pytest.mark.parametrize(
    ("method", "url", "kind"),
    [
        pytest.param(
            "GET", "https://h:6443/api/v1/pods?labelSelector=x", ("list", "pods"), id="list-all"
        ),
        pytest.param("GET", "https://h/api/v1/namespaces/a/pods", ("list", "pods"), id="list-ns"),
        pytest.param("GET", "https://h/api/v1/namespaces/a/pods/p", ("get", "pods"), id="get"),
        pytest.param(
            "PATCH",
            "https://h/api/v1/namespaces/a/pods/p/status",
            ("patch", "pods/status"),
            id="subresource",
        ),
        pytest.param("GET", "https://h/api/v1/nodes", ("list", "nodes"), id="cluster-scoped"),
        pytest.param("GET", "https://h/api/v1/namespaces", ("list", "namespaces"), id="namespaces"),
        pytest.param(
            "GET", "https://h/api/v1/namespaces/a", ("get", "namespaces"), id="a-namespace"
        ),
        pytest.param(
            "PATCH",
            "https://h/apis/modelscale.dev/v1alpha1/namespaces/a/modeldeployments/m/status",
            ("patch", "modeldeployments/status"),
            id="custom-status",
        ),
        pytest.param(
            "POST", "https://h/api/v1/namespaces/a/events", ("create", "events"), id="create"
        ),
        pytest.param("GET", "https://h/version", ("other", "/version"), id="other"),
    ],
)
def test_request_kind(method: str, url: str, kind: tuple[str, str]) -> None:
    assert request_kind(method, url) == kind
