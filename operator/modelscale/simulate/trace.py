"""Trace loading: per-request CSVs and 10-minute aggregate series, both as request arrays.

Per-request traces (`t_s,input_tokens,output_tokens`, as in `../shared/traces/azure2023_*`)
are replayed request by request. Aggregate traces (`window_start_s,total_rps,...,
mean_input_tokens,mean_output_tokens`, as in `servegen_*`) are replayed as seeded Poisson
arrivals at `total_rps * rate_scale` inside each window, with token counts drawn from a
geometric distribution around the window's means (the aggregate keeps only means).
"""

from __future__ import annotations

import csv
import gzip
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

PER_REQUEST_COLUMNS = ("t_s", "input_tokens", "output_tokens")
AGGREGATE_COLUMNS = ("window_start_s", "total_rps", "mean_input_tokens", "mean_output_tokens")


class TraceError(ValueError):
    """A trace that cannot be replayed; the message says what to fix."""


@dataclass(frozen=True)
class Trace:
    """Requests sorted by arrival; times in seconds from the start of the (sliced) trace."""

    name: str
    arrival_s: NDArray[np.float64]
    input_tokens: NDArray[np.int64]
    output_tokens: NDArray[np.int64]
    duration_s: float

    @property
    def requests(self) -> int:
        return int(self.arrival_s.size)


def _open_text(path: Path) -> io.TextIOBase:
    try:
        raw = path.read_bytes()
    except FileNotFoundError as err:
        raise TraceError(f"trace file not found: {path}") from err
    except OSError as err:
        raise TraceError(f"cannot read trace {path}: {err.strerror}") from err
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as err:
            raise TraceError(f"trace {path} is not valid gzip: {err}") from err
    return io.StringIO(raw.decode("utf-8", errors="replace"))


def load(
    path: str | Path,
    *,
    seed: int = 0,
    start_s: float = 0.0,
    duration_s: float | None = None,
    rate_scale: float = 1.0,
) -> Trace:
    """Load either trace format, keep the slice [start_s, start_s + duration_s)."""
    p = Path(path)
    if rate_scale <= 0:
        raise TraceError(f"--rate-scale must be > 0, got {rate_scale}")
    text = _open_text(p)
    reader = csv.reader(text)
    header = [h.strip() for h in next(reader, [])]
    rows = [r for r in reader if r]
    if all(c in header for c in PER_REQUEST_COLUMNS):
        idx = [header.index(c) for c in PER_REQUEST_COLUMNS]
        data = _numeric(rows, idx, p)
        return _per_request(
            p.name, data, seed=seed, start_s=start_s, duration_s=duration_s, rate_scale=rate_scale
        )
    if all(c in header for c in AGGREGATE_COLUMNS):
        idx = [header.index(c) for c in AGGREGATE_COLUMNS]
        data = _numeric(rows, idx, p)
        return _aggregate(
            p.name, data, seed=seed, start_s=start_s, duration_s=duration_s, rate_scale=rate_scale
        )
    raise TraceError(
        f"trace {p} has columns {header!r}; expected per-request columns "
        f"{','.join(PER_REQUEST_COLUMNS)} or aggregate columns {','.join(AGGREGATE_COLUMNS)}"
    )


def _cell(text: str) -> float:
    # ServeGen leaves the token means empty in windows without requests.
    return float(text) if text.strip() else 0.0


def _numeric(rows: list[list[str]], idx: list[int], path: Path) -> NDArray[np.float64]:
    try:
        arr = np.array([[_cell(r[i]) for i in idx] for r in rows], dtype=np.float64)
    except (ValueError, IndexError) as err:
        raise TraceError(f"trace {path} has a non-numeric or short row: {err}") from err
    if arr.size == 0:
        raise TraceError(f"trace {path} has no data rows")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise TraceError(f"trace {path} has negative or non-finite values")
    return arr.reshape(-1, len(idx))


def _slice_bounds(
    first: float, last: float, start_s: float, duration_s: float | None, path_name: str
) -> tuple[float, float]:
    lo = first + start_s
    hi = last if duration_s is None else min(last, lo + duration_s)
    if hi <= lo:
        raise TraceError(
            f"--start {start_s:g} / --duration {duration_s} select nothing in {path_name} "
            f"(it spans {last - first:g} s)"
        )
    return lo, hi


def _per_request(
    name: str,
    data: NDArray[np.float64],
    *,
    seed: int,
    start_s: float,
    duration_s: float | None,
    rate_scale: float,
) -> Trace:
    order = np.argsort(data[:, 0], kind="stable")
    data = data[order]
    t = data[:, 0]
    lo, hi = _slice_bounds(float(t[0]), float(t[-1]) + 1e-9, start_s, duration_s, name)
    data = data[(t >= lo) & (t < hi)]
    if rate_scale != 1.0:
        # Thin (scale < 1) or superpose seeded copies (scale > 1) of the trace: each copy
        # keeps the trace's burst structure, shifted by a small random offset.
        rng = np.random.default_rng(seed)
        whole, frac = int(rate_scale), rate_scale - int(rate_scale)
        parts = []
        for k in range(whole):
            shift = 0.0 if k == 0 else rng.uniform(0.0, 5.0)
            copy = data.copy()
            copy[:, 0] += shift
            parts.append(copy)
        if frac > 0:
            parts.append(data[rng.random(data.shape[0]) < frac])
        data = np.concatenate(parts) if parts else data[:0]
        data = data[np.argsort(data[:, 0], kind="stable")]
    arrival = data[:, 0] - lo
    return Trace(
        name=name,
        arrival_s=arrival.astype(np.float64),
        input_tokens=np.maximum(1, data[:, 1]).astype(np.int64),
        output_tokens=np.maximum(1, data[:, 2]).astype(np.int64),
        duration_s=float(hi - lo),
    )


def _aggregate(
    name: str,
    data: NDArray[np.float64],
    *,
    seed: int,
    start_s: float,
    duration_s: float | None,
    rate_scale: float,
) -> Trace:
    data = data[np.argsort(data[:, 0], kind="stable")]
    starts = data[:, 0]
    width = float(np.median(np.diff(starts))) if starts.size > 1 else 600.0
    lo, hi = _slice_bounds(float(starts[0]), float(starts[-1]) + width, start_s, duration_s, name)
    rng = np.random.default_rng(seed)
    times, ins, outs = [], [], []
    for w_start, rps, mean_in, mean_out in data:
        a, b = max(w_start, lo), min(w_start + width, hi)
        if b <= a:
            continue
        n = int(rng.poisson(rps * rate_scale * (b - a)))
        times.append(np.sort(rng.uniform(a, b, n)))
        # Geometric token counts (mean preserved) give the heavy-ish spread real traces have.
        ins.append(rng.geometric(1.0 / max(1.0, mean_in), n))
        outs.append(rng.geometric(1.0 / max(1.0, mean_out), n))
    arrival = np.concatenate(times) if times else np.zeros(0)
    return Trace(
        name=name,
        arrival_s=(arrival - lo).astype(np.float64),
        input_tokens=np.concatenate(ins).astype(np.int64) if ins else np.zeros(0, np.int64),
        output_tokens=np.concatenate(outs).astype(np.int64) if outs else np.zeros(0, np.int64),
        duration_s=float(hi - lo),
    )
