"""Checks that block a scaling decision: metrics missing or stale (no decision at all),
or partial (no scale-down; scaling up stays allowed).

A check returns `Blocked(reason, message)` or None; `first_block` runs them in order.
Pure: time is `obs.now`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from modelscale.autoscaling.types import Observation, PolicyConfig

METRICS_MISSING = "MetricsMissing"
METRICS_STALE = "MetricsStale"
METRICS_PARTIAL = "MetricsPartial"


@dataclass(frozen=True)
class Blocked:
    reason: str
    message: str


Check = Callable[[Observation, PolicyConfig], Blocked | None]


def check_metrics_present(obs: Observation, config: PolicyConfig) -> Blocked | None:
    if obs.token_rate is None or obs.sample_time is None or not math.isfinite(obs.token_rate):
        if obs.metrics_error:
            return Blocked(METRICS_MISSING, obs.metrics_error)
        return Blocked(
            METRICS_MISSING,
            "Prometheus answered, but has no token-rate sample for this ModelDeployment's "
            "pods (are they scraped?)",
        )
    return None


def check_metrics_fresh(obs: Observation, config: PolicyConfig) -> Blocked | None:
    if obs.sample_time is None:
        return None  # nothing to judge: check_metrics_present reports it
    age = obs.now - obs.sample_time
    if age > config.stale_after_seconds:
        # The sample's own time, not its age: the message stays the same pass after pass
        # while the metrics stay stale, so the status is not rewritten every pass.
        taken = datetime.fromtimestamp(obs.sample_time, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return Blocked(
            METRICS_STALE,
            f"newest metric sample was taken at {taken}, more than "
            f"{config.stale_after_seconds:.0f} s ago (onMissingMetrics.staleAfterSeconds)",
        )
    return None


# Stale first: a pod whose metrics stopped leaves an old sample time *and* no rate, and
# "newest sample was taken at 12:00:00" tells the user more than "no sample".
METRIC_CHECKS: tuple[Check, ...] = (check_metrics_fresh, check_metrics_present)


def first_block(obs: Observation, config: PolicyConfig, checks: Iterable[Check]) -> Blocked | None:
    for check in checks:
        blocked = check(obs, config)
        if blocked is not None:
            return blocked
    return None


# ------------------------------------------------- partial data: no scale-down on it
# Like HPA, which counts pods without metrics as fully loaded when it scales down: the
# demand seen is a lower bound, so it can justify more replicas but never fewer.


def check_no_refused_series(obs: Observation, config: PolicyConfig) -> Blocked | None:
    if obs.metrics_problems:
        return Blocked(METRICS_PARTIAL, "; ".join(obs.metrics_problems))
    return None


def check_all_pods_reporting(obs: Observation, config: PolicyConfig) -> Blocked | None:
    reporting = obs.pods_reporting
    if reporting is not None and reporting < obs.warmed_replicas:
        return Blocked(
            METRICS_PARTIAL,
            f"only {reporting} of {obs.warmed_replicas} warmed pods have metrics in Prometheus "
            "(a pod that is not scraped reads as no load)",
        )
    return None


def check_latency_present(obs: Observation, config: PolicyConfig) -> Blocked | None:
    # Only where completeness is tracked (the operator's Prometheus reading): the trace
    # simulator computes its P99 from the requests themselves, and a window in which no
    # request finished is no missing data there. No traffic, no latency: a missing P99 at
    # a zero rate is expected, not partial.
    if obs.pods_reporting is None:
        return None
    if obs.p99_seconds is None and obs.token_rate is not None and obs.token_rate > 0:
        return Blocked(
            METRICS_PARTIAL,
            f"tokens are flowing ({obs.token_rate:.0f}/s) but the P99 latency is missing",
        )
    return None


SCALE_DOWN_CHECKS: tuple[Check, ...] = (
    check_no_refused_series,
    check_all_pods_reporting,
    check_latency_present,
)
