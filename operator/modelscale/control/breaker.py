"""The circuit breaker's decision for one ModelDeployment: which warmed pods to take out of
traffic (close their readiness gate) and which to replace. Pure: observations, settings and
the pods' own records in, verdicts with reasons out.

The rules, in order:
- only warmed pods with at least `minRequestRate` requests/s over the window are judged;
- a pod is sick when `failureRatio` of its requests failed (`FailingRequests`), or when its
  mean latency exceeds `latencyFactor` x the median of its healthy siblings' (at least two
  with traffic; `LatencyOutlier`);
- never more than `maxEjectedPercent` of the pods out at once, and never the last healthy
  pod: the sickest go first, the rest wait for the next pass;
- a pod already ejected `maxEjections` times is replaced instead (`Replace`).

Half-open: an ejected pod is not decided on here again; the warm-up runner warms it up
after `probeAfterSeconds`, and only a passing warm-up reopens its gate.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from modelscale.api.v1alpha1 import CircuitBreaker

CIRCUIT_OPEN = "CircuitOpen"
FAILING = "FailingRequests"
OUTLIER = "LatencyOutlier"
REPLACED = "CircuitReplaced"


@dataclass(frozen=True)
class PodHealth:
    name: str
    warmed: bool  # gate True (serving)
    ejected: bool  # gate closed by the breaker, not yet re-warmed
    ejections: int  # times the breaker ejected this pod so far
    success_rate: float | None  # requests/s answered over the window
    failure_rate: float | None  # requests/s failed (queue-policy refusals excluded)
    mean_latency_seconds: float | None


@dataclass(frozen=True)
class Verdict:
    pod: str
    action: Literal["Eject", "Replace"]
    reason: str
    message: str
    severity: float  # larger is sicker: the order in which the bound admits pods


def _rate(pod: PodHealth) -> float:
    return (pod.success_rate or 0.0) + (pod.failure_rate or 0.0)


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) and value >= 0 else None


def _sick(
    pod: PodHealth, siblings: Sequence[PodHealth], settings: CircuitBreaker
) -> Verdict | None:
    total = _rate(pod)
    failures = _finite(pod.failure_rate) or 0.0
    if total > 0 and failures / total >= settings.failure_ratio:
        share = failures / total
        return Verdict(
            pod.name,
            "Eject",
            FAILING,
            f"{100 * share:.0f} % of its requests failed over the last "
            f"{settings.window_seconds} s (threshold {100 * settings.failure_ratio:.0f} %)",
            severity=1.0 + share,
        )
    latency = _finite(pod.mean_latency_seconds)
    others = [
        value
        for value in (_finite(s.mean_latency_seconds) for s in siblings)
        if value is not None and value > 0
    ]
    if latency is not None and len(others) >= 2:
        median = statistics.median(others)
        if latency > settings.latency_factor * median:
            return Verdict(
                pod.name,
                "Eject",
                OUTLIER,
                f"mean latency {latency:.3f} s is {latency / median:.1f} x the median of its "
                f"siblings ({median:.3f} s; threshold {settings.latency_factor:g} x)",
                severity=latency / median / 100.0,  # failing pods go first
            )
    return None


def decide(pods: Sequence[PodHealth], *, settings: CircuitBreaker) -> list[Verdict]:
    """Verdicts for this pass; the bound and the last-healthy rule already applied."""
    judged = [
        p for p in pods if p.warmed and not p.ejected and _rate(p) >= settings.min_request_rate
    ]
    sick: list[Verdict] = []
    for pod in judged:
        siblings = [s for s in judged if s.name != pod.name]
        verdict = _sick(pod, siblings, settings)
        if verdict is not None:
            sick.append(verdict)
    if not sick:
        return []
    healthy = sum(1 for p in pods if p.warmed and not p.ejected)
    out_now = sum(1 for p in pods if p.ejected)
    bound = math.floor(len(pods) * settings.max_ejected_percent / 100)
    room = min(bound - out_now, healthy - 1)
    by_name = {p.name: p for p in pods}
    verdicts: list[Verdict] = []
    for found in sorted(sick, key=lambda v: -v.severity)[: max(0, room)]:
        ejections = by_name[found.pod].ejections
        if ejections >= settings.max_ejections:
            found = Verdict(  # noqa: PLW2901 (the same pod, a stronger action)
                found.pod,
                "Replace",
                REPLACED,
                f"{found.message}; ejected {ejections} times before: replacing the pod",
                found.severity,
            )
        verdicts.append(found)
    return verdicts


def probe_delay(*, ejected_at: float | None, settings: CircuitBreaker, now: float) -> float:
    """Seconds until an ejected pod may be warmed up again (half-open)."""
    if ejected_at is None:
        return 0.0
    return max(0.0, ejected_at + settings.probe_after_seconds - now)
