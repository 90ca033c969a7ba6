"""The figures a run is judged by: SLO attainment, cost, churn, cold requests.

A 1-minute window (by arrival time) meets the SLO when the P99 of its requests' TTFT, each
divided by that request's own TTFT target (`Slo.ttft_target`: base + allowance per 1k
prompt tokens), is at most 1, and the P99 of their TPOT is within the TPOT target. A window
is scored only when at least `MIN_REQUESTS` requests arrived in it: the P99 of fewer than
20 requests is their maximum, so one slow request would decide it, and a window with no
requests at all (a gap in the data) says nothing about the policy. Unscored windows are
counted and reported, never counted as met.

All per-window scoring goes through `window_scores`, the one place that reads per-request
results, so a change in how the engine reports them stays local.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import cast

import numpy as np
from numpy.typing import NDArray

from modelscale.simulate.engine import RunResult
from modelscale.simulate.replica import Slo
from modelscale.simulate.trace import Trace

WINDOW_S = 60.0
MIN_REQUESTS = 20  # fewer requests than this in a window: not scored
TARGET_WINDOWS = 0.99  # the share of scored windows a policy must meet
QUANTILE = 0.99


@dataclass(frozen=True)
class Figures:
    slo_attainment_requests: float
    slo_attainment_windows: float
    replica_seconds: float
    excess_over_oracle: float
    scale_events: int
    cold_requests: int
    windows_scored: int
    windows_unscored: int  # fewer than MIN_REQUESTS requests (gaps included)

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


@dataclass(frozen=True)
class WindowScores:
    """Per 1-minute window: requests that arrived, whether it is scored, whether it met
    the SLO (False for unscored windows), and its P99 TTFT / TPOT (0 when empty)."""

    counts: NDArray[np.int64]
    scored: NDArray[np.bool_]
    met: NDArray[np.bool_]
    p99_ttft: NDArray[np.float64]
    p99_tpot: NDArray[np.float64]

    @property
    def attainment(self) -> float:
        """Share of scored windows that met the SLO (0 when no window is scored)."""
        n = int(self.scored.sum())
        return float(self.met.sum() / n) if n else 0.0


def window_count(duration_s: float, *, window_s: float = WINDOW_S) -> int:
    return max(1, math.ceil(duration_s / window_s))


def window_index(trace: Trace, *, window_s: float = WINDOW_S) -> NDArray[np.int64]:
    """The window each request arrived in."""
    n = window_count(trace.duration_s, window_s=window_s)
    idx: NDArray[np.int64] = np.minimum((trace.arrival_s // window_s).astype(np.int64), n - 1)
    return idx


def ttft_targets(slo: Slo, input_tokens: NDArray[np.int64]) -> NDArray[np.float64]:
    """Each request's TTFT target, by the SLO's one definition (`Slo.ttft_target`)."""
    tokens = input_tokens.astype(np.float64)
    return np.asarray(slo.ttft_target(cast(float, tokens)), dtype=np.float64) + np.zeros(
        tokens.size
    )


def quantile_index(n: int) -> int:
    """Index (in sorted order) of the P99 of n values, as `p99` takes it."""
    return math.ceil(QUANTILE * (n - 1) - 1e-12)


def allowed_misses(n: int) -> int:
    """How many of n requests may miss a target while their P99 still meets it."""
    return n - 1 - quantile_index(n) if n > 0 else 0


def allowed_failed_windows(scored: int) -> int:
    """How many of `scored` windows may miss the SLO at the `TARGET_WINDOWS` target."""
    return scored - math.ceil(TARGET_WINDOWS * scored - 1e-9)


def p99(values: NDArray[np.float64]) -> float:
    """P99 without interpolation (the value at or above the 99th percentile), so requests
    that never finished (inf) count as violations instead of producing NaN."""
    if values.size == 0:
        return 0.0
    return float(np.sort(values)[quantile_index(values.size)])


def request_ok(trace: Trace, result: RunResult, slo: Slo) -> NDArray[np.bool_]:
    ok: NDArray[np.bool_] = (result.ttft <= ttft_targets(slo, trace.input_tokens)) & (
        result.tpot <= slo.tpot_s
    )
    return ok


def window_scores(
    trace: Trace, result: RunResult, slo: Slo, *, window_s: float = WINDOW_S
) -> WindowScores:
    n = window_count(trace.duration_s, window_s=window_s)
    idx = window_index(trace, window_s=window_s)
    bounds = np.searchsorted(idx, np.arange(n + 1))
    counts = np.diff(bounds).astype(np.int64)
    ratio = result.ttft / ttft_targets(slo, trace.input_tokens)
    ttft = np.zeros(n)
    tpot = np.zeros(n)
    ratio99 = np.zeros(n)
    for w in range(n):
        a, b = bounds[w], bounds[w + 1]
        if b > a:
            ttft[w] = p99(result.ttft[a:b])
            tpot[w] = p99(result.tpot[a:b])
            ratio99[w] = p99(ratio[a:b])
    scored = counts >= MIN_REQUESTS
    met = scored & (ratio99 <= 1.0) & (tpot <= slo.tpot_s)
    return WindowScores(counts=counts, scored=scored, met=met, p99_ttft=ttft, p99_tpot=tpot)


def window_p99s(
    trace: Trace, result: RunResult, *, window_s: float = WINDOW_S
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """P99 TTFT and P99 TPOT of the requests arriving in each window (0 when empty)."""
    s = window_scores(trace, result, Slo(), window_s=window_s)
    return s.p99_ttft, s.p99_tpot


def compute(
    trace: Trace, result: RunResult, slo: Slo, *, oracle_replica_seconds: float | None
) -> Figures:
    req = request_ok(trace, result, slo)
    win = window_scores(trace, result, slo)
    excess = (
        result.replica_seconds / oracle_replica_seconds - 1.0 if oracle_replica_seconds else 0.0
    )
    scored = int(win.scored.sum())
    return Figures(
        slo_attainment_requests=float(req.mean()) if req.size else 1.0,
        slo_attainment_windows=win.attainment,
        replica_seconds=round(result.replica_seconds, 1),
        excess_over_oracle=round(excess, 4),
        scale_events=result.scale_events,
        cold_requests=int(result.cold.sum()),
        windows_scored=scored,
        windows_unscored=int(win.scored.size - scored),
    )


# Student's t 0.975 quantiles for 1..30 degrees of freedom (beyond: the normal 1.96).
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


@dataclass(frozen=True)
class Interval:
    """Mean over seeds and its 95 % confidence interval (Student's t; zero width for
    one seed, where there is nothing to estimate the spread from)."""

    mean: float
    low: float
    high: float


def mean_ci(values: list[float]) -> Interval:
    if not values:
        raise ValueError("mean_ci needs at least one value")
    arr = np.asarray(values, dtype=np.float64)
    mean = float(arr.mean())
    if arr.size == 1:
        return Interval(mean, mean, mean)
    df = arr.size - 1
    t = _T975[df - 1] if df <= len(_T975) else 1.96
    half = t * float(arr.std(ddof=1)) / math.sqrt(arr.size)
    return Interval(mean, mean - half, mean + half)


FIELDS = tuple(Figures.__dataclass_fields__)


def aggregate(runs: list[Figures]) -> tuple[Figures, dict[str, Interval]]:
    """The mean Figures over seeds (counts rounded) and each figure's interval."""
    cis = {k: mean_ci([float(getattr(f, k)) for f in runs]) for k in FIELDS}
    mean = Figures(
        slo_attainment_requests=round(cis["slo_attainment_requests"].mean, 4),
        slo_attainment_windows=round(cis["slo_attainment_windows"].mean, 4),
        replica_seconds=round(cis["replica_seconds"].mean, 1),
        excess_over_oracle=round(cis["excess_over_oracle"].mean, 4),
        scale_events=round(cis["scale_events"].mean),
        cold_requests=round(cis["cold_requests"].mean),
        windows_scored=round(cis["windows_scored"].mean),
        windows_unscored=round(cis["windows_unscored"].mean),
    )
    return mean, cis
