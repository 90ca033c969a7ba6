"""Whether a pod is warm, decided without I/O: the verdict after each warm-up request
(latencies settled, or a request failed, or the budget is spent) and when to retry."""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from modelscale.api.v1alpha1 import WarmUp, WarmUpSuccess
from modelscale.warmup import reasons

# Latencies closer than this to their median are equal: sub-5 ms jitter on a busy node is
# scheduler noise, not a cold model, and would otherwise keep a fast model "unstable".
LATENCY_NOISE_FLOOR_SECONDS = 0.005
# A model still getting faster after `count` requests gets up to this many times `count`
# before the attempt fails: the API's `count` is "requests per pod", not a hard stop.
EXTRA_REQUESTS_FACTOR = 4


# How Triton says "this request is invalid" (a wrong shape or datatype, an input the model
# does not take): the HTTP status and the gRPC code its clients report.
REJECTED_STATUSES = frozenset({"400", "StatusCode.INVALID_ARGUMENT"})


@dataclass(frozen=True)
class Sample:
    ok: bool
    latency_seconds: float
    error: str = ""
    # The server's status for a failed request (`REJECTED_STATUSES`: it refused the request
    # itself, which another pod would refuse as well).
    status: str = ""

    @property
    def rejected(self) -> bool:
        return not self.ok and self.status in REJECTED_STATUSES


@dataclass(frozen=True)
class WarmupResult:
    ok: bool
    reason: str
    message: str
    requests: int = 0
    duration_seconds: float = 0.0
    median_latency_seconds: float | None = None  # of the last N (the warmed latency)
    first_latency_seconds: float | None = None  # the cold one
    latencies: tuple[float, ...] = ()


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 10 else f"{seconds:.1f} s"


def is_stable(latencies: Sequence[float], criteria: WarmUpSuccess) -> bool:
    """The last N latencies lie within factor × their median (both ways), and they are not
    still falling step by step: a cold start that decays gradually (caches filling) stays
    within a loose factor from one request to the next while the model is still warming."""
    n = max(1, criteria.stable_last_n)
    if len(latencies) < n:
        return False
    window = latencies[-n:]
    median = statistics.median(window)
    high = median * criteria.max_latency_factor + LATENCY_NOISE_FLOOR_SECONDS
    low = median / criteria.max_latency_factor - LATENCY_NOISE_FLOOR_SECONDS
    within = all(low <= x <= high for x in window)
    still_falling = n > 1 and all(
        later < earlier - LATENCY_NOISE_FLOOR_SECONDS
        for earlier, later in itertools.pairwise(window)
    )
    return within and not still_falling


def judge(
    *, samples: Sequence[Sample], settings: WarmUp, duration_seconds: float
) -> WarmupResult | None:
    """Verdict after each completed request: None means "send more"."""
    latencies = tuple(s.latency_seconds for s in samples)
    first = latencies[0] if latencies else None
    failed = [s for s in samples if not s.ok]
    if rejected := [s for s in failed if s.rejected]:
        # The spec's fault, not the pod's: replacing the pod would loop for ever.
        return _result(
            ok=False,
            reason=reasons.INVALID_REQUEST,
            message=(
                f"Triton rejects the warm-up request as invalid ({rejected[0].status}): "
                f"{rejected[0].error[:300]}; fix spec.warmUp.requests (the pod is kept and "
                "the request is tried again later)"
            ),
            samples=samples,
            duration_seconds=duration_seconds,
        )
    if failed:
        return _result(
            ok=False,
            reason=reasons.REQUEST_FAILED,
            message=(
                f"{len(failed)} of {len(samples)} warm-up requests failed "
                f"after {duration_seconds:.1f} s: {failed[0].error[:200]}"
            ),
            samples=samples,
            duration_seconds=duration_seconds,
        )
    n = max(1, settings.success.stable_last_n)
    median = statistics.median(latencies[-n:]) if latencies else None
    if len(samples) >= minimum_requests(settings=settings) and is_stable(
        latencies, settings.success
    ):
        assert median is not None and first is not None
        return _result(
            ok=True,
            reason=reasons.WARMED_UP,
            message=(
                f"warmed up with {len(samples)} requests in {duration_seconds:.1f} s; "
                f"median latency {_ms(median)} over the last {n} "
                f"(first request {_ms(first)})"
            ),
            samples=samples,
            duration_seconds=duration_seconds,
            median=median,
        )
    if len(samples) >= budget(settings=settings):
        spread = (
            f"; last {n} between {_ms(min(latencies[-n:]))} and {_ms(max(latencies[-n:]))}"
            if len(latencies) >= n
            else ""
        )
        return _result(
            ok=False,
            reason=reasons.NOT_STABLE,
            message=(
                f"latency still not within {settings.success.max_latency_factor}x of its median "
                f"after {len(samples)} requests in {duration_seconds:.1f} s{spread}"
            ),
            samples=samples,
            duration_seconds=duration_seconds,
            median=median,
        )
    return None


def failure(
    *, reason: str, message: str, samples: Sequence[Sample] = (), duration_seconds: float = 0.0
) -> WarmupResult:
    return _result(
        ok=False, reason=reason, message=message, samples=samples, duration_seconds=duration_seconds
    )


def _result(
    *,
    ok: bool,
    reason: str,
    message: str,
    samples: Sequence[Sample],
    duration_seconds: float,
    median: float | None = None,
) -> WarmupResult:
    """The one constructor every verdict goes through: counts and latencies from `samples`."""
    latencies = tuple(s.latency_seconds for s in samples)
    return WarmupResult(
        ok=ok,
        reason=reason,
        message=message,
        requests=len(samples),
        duration_seconds=duration_seconds,
        median_latency_seconds=median,
        first_latency_seconds=latencies[0] if latencies else None,
        latencies=latencies,
    )


def minimum_requests(*, settings: WarmUp) -> int:
    """Requests one attempt sends at least: `count` (and never fewer than N)."""
    return max(settings.count, settings.success.stable_last_n, 1)


def budget(*, settings: WarmUp) -> int:
    """Most requests one attempt may send: `count`, then more while latencies still fall."""
    return minimum_requests(settings=settings) * EXTRA_REQUESTS_FACTOR


# ---------------------------------------------------------------------------------------
# Retries


def backoff_seconds(*, attempt: int, base: float = 10.0, cap: float = 300.0) -> float:
    """Delay before attempt `attempt + 1` after `attempt` failures (1-based): 10, 20, 40 … 300."""
    if attempt <= 0:
        return 0.0
    return float(min(cap, base * 2 ** (attempt - 1)))


def should_give_up(*, attempts: int, settings: WarmUp) -> bool:
    return attempts >= settings.max_attempts
