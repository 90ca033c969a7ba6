"""Per-window scoring: what `RunResult.windows` holds and the per-window P99 it is built
from. Split out of engine.py; behaviour unchanged."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from modelscale.simulate.pool import F64, I64, run_starts

WINDOW_S = 60.0  # scoring window


@dataclass
class WindowStats:
    """Per scoring window (requests grouped by arrival, `window_s` each): how many arrived,
    P99 TTFT / TPOT (NaN when none), P99 of TTFT minus each request's TTFT target (<= 0:
    TTFT met), requests that met both targets, and `gap`: no requests, or inside a gap of
    the trace's data. `met` = not a gap, P99 TTFT within target and P99 TPOT within target:
    gaps are never scored as met."""

    window_s: float
    requests: I64
    p99_ttft: F64
    p99_tpot: F64
    p99_ttft_over_target: F64
    ok_requests: I64
    gap: NDArray[np.bool_]
    met: NDArray[np.bool_]

    @property
    def start_s(self) -> F64:
        return np.arange(self.requests.size) * self.window_s


def group_p99(win: I64, values: F64, n: int) -> F64:
    """P99 (method "higher", so inf counts as a miss) of `values` per window index."""
    out = np.full(n, np.nan)
    if win.size == 0:
        return out
    order = np.lexsort((values, win))
    w, v = win[order], values[order]
    starts = np.flatnonzero(run_starts(w))
    counts = np.diff(np.append(starts, w.size))
    pick = starts + np.ceil(0.99 * (counts - 1)).astype(np.int64)
    out[w[starts]] = v[pick]
    return out
