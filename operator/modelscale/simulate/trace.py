"""Trace loading: per-request CSVs and 10-minute aggregate series.

Per-request traces (`t_s,input_tokens,output_tokens[,cached_tokens][,priority]`, as in
`e2e/traces/azure2023_*`) are replayed request by request; the optional
`cached_tokens` column gives the prompt tokens a prefix cache serves (their prefill is
skipped), the optional `priority` column each request's priority level (1 = highest; read
only under a serving policy, simulate/serving.py). Aggregate traces
(`window_start_s,total_rps,...,mean_input_tokens,mean_output_tokens`, as in `servegen_*`)
are replayed as seeded Poisson arrivals at `total_rps * rate_scale` inside each window,
with token counts drawn from a geometric distribution around the window's means (the
aggregate keeps only means). The rate is the window's mean throughout the window (a step
at each boundary), or, with `smooth`, linear between the centres of neighbouring windows
(a sensitivity check: the series keeps only 10-minute means, and how the rate moved
within them is not in the data; docs/benchmarks.md, "Steps or ramps?").

`load` builds the requests in memory (a `Trace`); `stream` gives the same requests as
chunks of at most `CHUNK_S` seconds (a `TraceStream`), so an aggregate of any length at
any rate replays in memory bounded by one chunk. Both report the trace's data gaps: source
windows with no requests (or missing from the series) while the trace has traffic.
"""

from __future__ import annotations

import csv
import gzip
import io
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, TypedDict, Unpack

import numpy as np
from numpy.typing import NDArray

PER_REQUEST_COLUMNS = ("t_s", "input_tokens", "output_tokens")
CACHED_COLUMN = "cached_tokens"
PRIORITY_COLUMN = "priority"  # optional: the request's priority level, 1 = highest
AGGREGATE_COLUMNS = ("window_start_s", "total_rps", "mean_input_tokens", "mean_output_tokens")
CHUNK_S = 60.0  # a stream's chunk: at most this many seconds of arrivals
# With `smooth`, the rate is held for this long at the interpolated value of its midpoint.
SMOOTH_STEP_S = 10.0


class TraceError(ValueError):
    """A trace that cannot be replayed; the message says what to fix."""


class Gap(NamedTuple):
    """A stretch [start_s, end_s) of the (sliced) trace with no data."""

    start_s: float
    end_s: float


class Chunk(NamedTuple):
    """Consecutive requests, sorted by arrival."""

    arrival_s: NDArray[np.float64]
    input_tokens: NDArray[np.int64]
    output_tokens: NDArray[np.int64]
    cached_tokens: NDArray[np.int64]
    priority: NDArray[np.int64] | None = None  # priority level, 1 = highest (None: no column)


@dataclass(frozen=True)
class Trace:
    """Requests sorted by arrival; times in seconds from the start of the (sliced) trace."""

    name: str
    arrival_s: NDArray[np.float64]
    input_tokens: NDArray[np.int64]
    output_tokens: NDArray[np.int64]
    duration_s: float
    # Prompt tokens served from a prefix cache (None: the trace has no such column).
    cached_tokens: NDArray[np.int64] | None = None
    gaps: tuple[Gap, ...] = ()
    # Priority level per request, 1 = highest (None: the trace has no such column).
    priority: NDArray[np.int64] | None = None

    @property
    def requests(self) -> int:
        return int(self.arrival_s.size)

    def chunks(self) -> Iterator[Chunk]:
        cached = (
            self.cached_tokens
            if self.cached_tokens is not None
            else np.zeros(self.requests, dtype=np.int64)
        )
        yield Chunk(self.arrival_s, self.input_tokens, self.output_tokens, cached, self.priority)


@dataclass(frozen=True)
class TraceStream:
    """A trace replayed chunk by chunk; `chunks()` starts it afresh (same seed, same
    requests) each time it is called."""

    name: str
    duration_s: float
    gaps: tuple[Gap, ...]
    expected_requests: float  # mean request count (Poisson) over the slice
    make: Callable[[], Iterator[Chunk]]

    def chunks(self) -> Iterator[Chunk]:
        return self.make()

    def materialise(self) -> Trace:
        """All requests in memory (only for slices that fit)."""
        parts = list(self.chunks())
        return Trace(
            name=self.name,
            arrival_s=_cat_f([c.arrival_s for c in parts]),
            input_tokens=_cat_i([c.input_tokens for c in parts]),
            output_tokens=_cat_i([c.output_tokens for c in parts]),
            duration_s=self.duration_s,
            gaps=self.gaps,
        )


def _cat_f(parts: list[NDArray[np.float64]]) -> NDArray[np.float64]:
    return np.concatenate(parts) if parts else np.zeros(0)


def _cat_i(parts: list[NDArray[np.int64]]) -> NDArray[np.int64]:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


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


class _Part(NamedTuple):
    seed: int
    start_s: float
    duration_s: float | None
    rate_scale: float
    smooth: bool = False


class Slice(TypedDict, total=False):
    """Which part of a trace to replay, and how: `stream`'s keyword arguments."""

    seed: int
    start_s: float
    duration_s: float | None
    rate_scale: float
    smooth: bool


def _rows(path: Path) -> tuple[list[str], list[list[str]]]:
    reader = csv.reader(_open_text(path))
    header = [h.strip() for h in next(reader, [])]
    return header, [r for r in reader if r]


def aggregate_windows(path: str | Path) -> NDArray[np.float64]:
    """An aggregate trace's windows, one row of `AGGREGATE_COLUMNS` each, sorted by start:
    the series a replay draws its requests from, for analyses of the series itself."""
    p = Path(path)
    header, rows = _rows(p)
    if not all(c in header for c in AGGREGATE_COLUMNS):
        raise TraceError(
            f"trace {p} has columns {header!r}; "
            f"an aggregate trace has {','.join(AGGREGATE_COLUMNS)}"
        )
    data = _numeric(rows, [header.index(c) for c in AGGREGATE_COLUMNS], p)
    out: NDArray[np.float64] = data[np.argsort(data[:, 0], kind="stable")]
    return out


def load(path: str | Path, **part: Unpack[Slice]) -> Trace:
    """Load either trace format, keep the slice [start_s, start_s + duration_s): `stream`,
    materialised."""
    src = stream(path, **part)
    return src if isinstance(src, Trace) else src.materialise()


def stream(
    path: str | Path,
    *,
    seed: int = 0,
    start_s: float = 0.0,
    duration_s: float | None = None,
    rate_scale: float = 1.0,
    smooth: bool = False,
) -> Trace | TraceStream:
    """Like `load`, but an aggregate trace comes back as a `TraceStream` whose requests are
    drawn chunk by chunk while it replays. Per-request files are read whole (their size is
    the file's). `smooth`: an aggregate's rate moves linearly between window centres
    instead of stepping at window boundaries (refused for a per-request trace, which has
    its own arrival times)."""
    p = Path(path)
    part = _Part(
        seed=seed, start_s=start_s, duration_s=duration_s, rate_scale=rate_scale, smooth=smooth
    )
    if rate_scale <= 0:
        raise TraceError(f"--rate-scale must be > 0, got {rate_scale}")
    header, rows = _rows(p)
    if all(c in header for c in PER_REQUEST_COLUMNS):
        if smooth:
            raise TraceError(
                f"trace {p} has one row per request: --smooth applies to aggregate traces "
                f"({','.join(AGGREGATE_COLUMNS)}) only; drop it"
            )
        optional = [c for c in (CACHED_COLUMN, PRIORITY_COLUMN) if c in header]
        cols = list(PER_REQUEST_COLUMNS) + optional
        data = _numeric(rows, [header.index(c) for c in cols], p)
        return _per_request(p.name, data, part, optional=tuple(optional))
    if all(c in header for c in AGGREGATE_COLUMNS):
        idx = [header.index(c) for c in AGGREGATE_COLUMNS]
        data = _numeric(rows, idx, p)
        return _aggregate(p.name, data, part)
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
    part: _Part,
    *,
    optional: tuple[str, ...] = (),
) -> Trace:
    order = np.argsort(data[:, 0], kind="stable")
    data = data[order]
    t = data[:, 0]
    lo, hi = _slice_bounds(float(t[0]), float(t[-1]) + 1e-9, part.start_s, part.duration_s, name)
    data = data[(t >= lo) & (t < hi)]
    if part.rate_scale != 1.0:
        # Thin (scale < 1) or superpose seeded copies (scale > 1) of the trace: each copy
        # keeps the trace's burst structure, shifted by a small random offset.
        rng = np.random.default_rng(part.seed)
        whole, frac = int(part.rate_scale), part.rate_scale - int(part.rate_scale)
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
    inputs = np.maximum(1, data[:, 1]).astype(np.int64)
    column = {c: data[:, len(PER_REQUEST_COLUMNS) + k] for k, c in enumerate(optional)}
    cached = priority = None
    if CACHED_COLUMN in column:
        # A prefix-cache hit covers at most the prompt minus the one token that is computed.
        cached = np.minimum(column[CACHED_COLUMN].astype(np.int64), inputs - 1)
    if PRIORITY_COLUMN in column:
        levels = column[PRIORITY_COLUMN]
        if levels.size and (np.any(levels != np.round(levels)) or levels.min() < 1):
            raise TraceError(f"trace {name}: priority levels must be whole numbers >= 1")
        priority = levels.astype(np.int64)
    return Trace(
        name=name,
        arrival_s=arrival.astype(np.float64),
        input_tokens=inputs,
        output_tokens=np.maximum(1, data[:, 2]).astype(np.int64),
        duration_s=float(hi - lo),
        cached_tokens=cached,
        priority=priority,
    )


def _aggregate(
    name: str,
    data: NDArray[np.float64],
    part: _Part,
) -> TraceStream:
    data = data[np.argsort(data[:, 0], kind="stable")]
    starts = data[:, 0]
    width = float(np.median(np.diff(starts))) if starts.size > 1 else 600.0
    lo, hi = _slice_bounds(
        float(starts[0]), float(starts[-1]) + width, part.start_s, part.duration_s, name
    )
    # a, b, rps, mean in, out; and the rates at the window's start and end edges that
    # `smooth` interpolates towards (the window's own where a neighbour is missing or empty).
    pieces: list[tuple[float, float, float, float, float]] = []
    edges: list[tuple[float, float, float]] = []  # centre, rate at start edge, at end edge
    gaps: list[Gap] = []
    has_traffic = bool(np.any(data[:, 1] > 0))

    def gap(a: float, b: float) -> None:
        a, b = max(a, lo), min(b, hi)
        if b > a:
            if gaps and abs(gaps[-1].end_s - (a - lo)) < 1e-9:
                gaps[-1] = Gap(gaps[-1].start_s, b - lo)
            else:
                gaps.append(Gap(a - lo, b - lo))

    rates = data[:, 1] * part.rate_scale

    def neighbour(i: int, j: int) -> float:
        """The rate halfway to window j from window i: the mean of the two when j is the
        adjacent window and both have traffic, else window i's own (no ramp into a gap)."""
        own = float(rates[i])
        if not 0 <= j < len(rates) or abs(abs(starts[j] - starts[i]) - width) > 0.5 * width:
            return own
        if own <= 0 or rates[j] <= 0:
            return own
        return 0.5 * (own + float(rates[j]))

    prev_end = float(starts[0])
    for i, (w_start, rps, mean_in, mean_out) in enumerate(data):
        if w_start > prev_end + 0.5 * width:
            gap(prev_end, float(w_start))  # windows missing from the series
        prev_end = float(w_start) + width
        a, b = max(w_start, lo), min(w_start + width, hi)
        if b <= a:
            continue
        if rps <= 0 and has_traffic:
            gap(a, b)
        pieces.append((a, b, float(rates[i]), mean_in, mean_out))
        edges.append((float(w_start) + 0.5 * width, neighbour(i, i - 1), neighbour(i, i + 1)))

    def rate_at(k: int, t: NDArray[np.float64]) -> NDArray[np.float64]:
        """Piece k's rate at times t: its mean, or with `smooth` linear from the start
        edge through the centre to the end edge."""
        rate = pieces[k][2]
        if not part.smooth:
            return np.full(t.shape, rate)
        centre, at_start, at_end = edges[k]
        half = 0.5 * width
        x = np.clip((t - centre) / half, -1.0, 1.0)
        return np.where(x < 0, rate + (rate - at_start) * x, rate + (at_end - rate) * x)

    def steps(k: int, c0: float, c1: float) -> list[tuple[float, float, float]]:
        """(from, to, rate) over [c0, c1): one step, or SMOOTH_STEP_S steps with `smooth`."""
        if not part.smooth:
            return [(c0, c1, pieces[k][2])]
        cuts = np.append(np.arange(c0, c1, SMOOTH_STEP_S), c1)
        mids = 0.5 * (cuts[:-1] + cuts[1:])
        return [
            (float(s0), float(s1), float(r))
            for s0, s1, r in zip(cuts[:-1], cuts[1:], rate_at(k, mids), strict=True)
            if s1 > s0
        ]

    expected = sum(
        (s1 - s0) * r for k, (a, b, *_) in enumerate(pieces) for s0, s1, r in steps(k, a, b)
    )

    def chunks() -> Iterator[Chunk]:
        rng = np.random.default_rng(part.seed)
        for k, (a, b, _, mean_in, mean_out) in enumerate(pieces):
            bounds = np.append(np.arange(a, b, CHUNK_S), b)
            for c0, c1 in itertools.pairwise(bounds):
                if c1 <= c0:
                    continue
                if part.smooth:
                    yield from _smooth_chunk(rng, steps(k, c0, c1), lo, mean_in, mean_out)
                    continue
                rate = pieces[k][2]
                n = int(rng.poisson(rate * (c1 - c0)))
                times = np.sort(rng.uniform(c0, c1, n)) - lo
                # Geometric token counts (mean preserved): the heavy-ish spread real
                # traces have.
                ins = rng.geometric(1.0 / max(1.0, mean_in), n).astype(np.int64)
                outs = rng.geometric(1.0 / max(1.0, mean_out), n).astype(np.int64)
                yield Chunk(times, ins, outs, np.zeros(n, dtype=np.int64))

    return TraceStream(
        name=name,
        duration_s=float(hi - lo),
        gaps=tuple(gaps),
        expected_requests=expected,
        make=chunks,
    )


def _smooth_chunk(
    rng: np.random.Generator,
    steps: list[tuple[float, float, float]],
    lo: float,
    mean_in: float,
    mean_out: float,
) -> Iterator[Chunk]:
    """One chunk of a smooth replay: Poisson arrivals at each step's rate, in one Chunk."""
    counts = [int(rng.poisson(r * (s1 - s0))) for s0, s1, r in steps]
    times = (
        np.concatenate(
            [np.sort(rng.uniform(s0, s1, n)) for (s0, s1, _), n in zip(steps, counts, strict=True)]
            or [np.zeros(0)]
        )
        - lo
    )
    n = int(times.size)
    ins = rng.geometric(1.0 / max(1.0, mean_in), n).astype(np.int64)
    outs = rng.geometric(1.0 / max(1.0, mean_out), n).astype(np.int64)
    yield Chunk(times, ins, outs, np.zeros(n, dtype=np.int64))
