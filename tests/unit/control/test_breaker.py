"""The circuit breaker's decision: a failing pod or a latency outlier is ejected, the sickest
first, never beyond the bound nor the last healthy pod; after too many ejections, replaced."""

from __future__ import annotations

import pytest

from modelscale.api.v1alpha1 import CircuitBreaker
from modelscale.control import breaker
from modelscale.control.breaker import PodHealth

SETTINGS = CircuitBreaker()  # defaults: 50 % failures, 3x latency, 34 %, 3 ejections


def pod(
    name: str,
    *,
    ok: float = 10.0,
    failed: float = 0.0,
    latency: float | None = 0.1,
    warmed: bool = True,
    ejected: bool = False,
    ejections: int = 0,
) -> PodHealth:
    return PodHealth(name, warmed, ejected, ejections, ok, failed, latency)


def decide(*pods: PodHealth, settings: CircuitBreaker = SETTINGS) -> list[tuple[str, str, str]]:
    return [(v.pod, v.action, v.reason) for v in breaker.decide(pods, settings=settings)]


@pytest.mark.parametrize(
    ("pods", "want"),
    [
        pytest.param((pod("a"), pod("b"), pod("c")), [], id="all-healthy"),
        pytest.param(
            (pod("a", ok=1, failed=9), pod("b"), pod("c")),
            [("a", "Eject", breaker.FAILING)],
            id="one-failing",
        ),
        pytest.param(
            (pod("a", latency=0.5), pod("b"), pod("c")),
            [("a", "Eject", breaker.OUTLIER)],
            id="latency-outlier",
        ),
        pytest.param(
            (pod("a", latency=0.5), pod("b")),
            [],
            id="outlier-needs-two-siblings",
        ),
        pytest.param(
            (pod("a", ok=0.05, failed=0.05), pod("b"), pod("c")),
            [],
            id="too-little-traffic-to-judge",
        ),
        pytest.param(
            (pod("a", ok=1, failed=9), pod("b", ok=0, failed=10), pod("c")),
            [("b", "Eject", breaker.FAILING)],
            id="bound-admits-the-sickest-first",
        ),
        pytest.param(
            (pod("a", ok=0, failed=10), pod("b", ejected=True, warmed=False), pod("c")),
            [],
            id="bound-already-used",
        ),
        pytest.param(
            (pod("a", ok=0, failed=10), pod("b", ok=0, failed=10)),
            [],
            id="never-the-last-healthy-pod",
        ),
        pytest.param(
            (pod("a", ok=0, failed=10, ejections=3), pod("b"), pod("c")),
            [("a", "Replace", breaker.REPLACED)],
            id="replaced-after-max-ejections",
        ),
        pytest.param(
            (pod("a", ok=0, failed=10, warmed=False), pod("b"), pod("c")),
            [],
            id="cold-pods-are-the-warm-ups-business",
        ),
        pytest.param(
            (pod("a", ok=0, failed=float("nan")), pod("b"), pod("c")),
            [],
            id="nan-is-no-evidence",
        ),
    ],
)
def test_decide(pods: tuple[PodHealth, ...], want: list[tuple[str, str, str]]) -> None:
    assert decide(*pods) == want


def test_a_larger_bound_ejects_more() -> None:
    pods = [pod("a", ok=0, failed=10), pod("b", ok=0, failed=10), pod("c"), pod("d")]
    wide = CircuitBreaker(max_ejected_percent=50)
    assert {p for p, _, _ in decide(*pods, settings=wide)} == {"a", "b"}


def test_the_verdict_says_why() -> None:
    (verdict,) = breaker.decide([pod("a", ok=2, failed=8), pod("b"), pod("c")], settings=SETTINGS)
    assert verdict.message == "80 % of its requests failed over the last 30 s (threshold 50 %)"


@pytest.mark.parametrize(
    ("ejected_at", "now", "want"),
    [(None, 100.0, 0.0), (100.0, 105.0, 25.0), (100.0, 130.0, 0.0)],
)
def test_probe_waits_probe_after_seconds(ejected_at: float | None, now: float, want: float) -> None:
    assert breaker.probe_delay(ejected_at=ejected_at, settings=SETTINGS, now=now) == want
