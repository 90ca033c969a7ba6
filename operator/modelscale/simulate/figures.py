"""The figures a run is judged by: SLO attainment, cost, churn, cold requests."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from modelscale.simulate.engine import RunResult
from modelscale.simulate.replica import Slo
from modelscale.simulate.trace import Trace

WINDOW_S = 60.0


@dataclass(frozen=True)
class Figures:
    slo_attainment_requests: float
    slo_attainment_windows: float
    replica_seconds: float
    excess_over_oracle: float
    scale_events: int
    cold_requests: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def p99(values: NDArray[np.float64]) -> float:
    """P99 without interpolation (the value at or above the 99th percentile), so requests
    that never finished (inf) count as violations instead of producing NaN."""
    if values.size == 0:
        return 0.0
    return float(np.quantile(values, 0.99, method="higher"))


def request_ok(result: RunResult, slo: Slo) -> NDArray[np.bool_]:
    ok: NDArray[np.bool_] = (result.ttft <= slo.ttft_s) & (result.tpot <= slo.tpot_s)
    return ok


def window_p99s(
    trace: Trace, result: RunResult, *, window_s: float = WINDOW_S
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """P99 TTFT and P99 TPOT of the requests arriving in each window (0 when empty)."""
    n = max(1, int(np.ceil(trace.duration_s / window_s)))
    idx = np.minimum((trace.arrival_s // window_s).astype(np.int64), n - 1)
    bounds = np.searchsorted(idx, np.arange(n + 1))
    ttft = np.zeros(n)
    tpot = np.zeros(n)
    for w in range(n):
        a, b = bounds[w], bounds[w + 1]
        if b > a:
            ttft[w] = p99(result.ttft[a:b])
            tpot[w] = p99(result.tpot[a:b])
    return ttft, tpot


def window_ok(
    trace: Trace, result: RunResult, slo: Slo, *, window_s: float = WINDOW_S
) -> NDArray[np.bool_]:
    """Whether each window's P99 TTFT and P99 TPOT both meet their targets."""
    ttft, tpot = window_p99s(trace, result, window_s=window_s)
    ok: NDArray[np.bool_] = (ttft <= slo.ttft_s) & (tpot <= slo.tpot_s)
    return ok


def compute(
    trace: Trace, result: RunResult, slo: Slo, *, oracle_replica_seconds: float | None
) -> Figures:
    req = request_ok(result, slo)
    win = window_ok(trace, result, slo)
    excess = (
        result.replica_seconds / oracle_replica_seconds - 1.0 if oracle_replica_seconds else 0.0
    )
    return Figures(
        slo_attainment_requests=float(req.mean()) if req.size else 1.0,
        slo_attainment_windows=float(win.mean()) if win.size else 1.0,
        replica_seconds=round(result.replica_seconds, 1),
        excess_over_oracle=round(excess, 4),
        scale_events=result.scale_events,
        cold_requests=int(result.cold.sum()),
    )
