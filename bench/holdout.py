"""Choose the next held-out ServeGen slices by the splits' written rule, from the traces'
10-minute rates alone (no policy runs, nothing about results is read).

    .venv/bin/python bench/holdout.py [--as-if-free NAME ...]

The rule (docs/benchmarks.md, "The cases"; the tenth split's, with the fourteenth's
refinement): among the 1.5 h windows on half-hour starts that overlap no case of the same
trace, skip any that holds a zero-rate 10-minute row (a gap in the data: its swing is the
gap's, not the load's), and take those with the widest swing of request rate (the
largest 10-minute `total_rps` minus the smallest in the window), not overlapping each
other (equal swings: the later start): two of m-large, one of m-small. Until the
sixteenth split this was done by hand; `--as-if-free` treats named cases as not yet
chosen, so the script can be checked against earlier splits (tests/unit/simulate/
test_bench_holdout.py does so for the fourteenth and the fifteenth).
"""

from __future__ import annotations

import argparse
import csv
import gzip
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cases import CASES, TRACES, Case

WINDOW_S = 5400.0  # 1.5 h
STEP_S = 1800.0  # half-hour starts
ROW_S = 600.0  # the aggregates' 10-minute rows
DAY_S = 86400.0
# (trace file, slices to hold out): two of m-large, one of m-small, as in every split.
QUOTA = (
    ("servegen_language_m-large_10min.csv.gz", 2),
    ("servegen_language_m-small_10min.csv.gz", 1),
)


@dataclass(frozen=True)
class Slice:
    file: str
    start_s: float
    swing_rps: float
    rates: tuple[float, ...]

    @property
    def day(self) -> int:
        return int(self.start_s // DAY_S) + 1

    @property
    def start_h(self) -> float:
        return (self.start_s % DAY_S) / 3600.0


def rates(file: str) -> dict[float, float]:
    """Request rate per 10-minute row, keyed by the row's start (s)."""
    with gzip.open(TRACES / file, "rt", newline="") as fh:
        return {float(r["window_start_s"]): float(r["total_rps"]) for r in csv.DictReader(fh)}


def _overlaps(a: float, b: float) -> bool:
    return a < b + WINDOW_S and b < a + WINDOW_S


def choose(
    file: str, n: int, rows: dict[float, float], used: Iterable[tuple[float, float]]
) -> list[Slice]:
    """The `n` widest-swing free windows of one trace, none overlapping another."""
    used = list(used)
    end = max(rows) + ROW_S
    candidates = []
    start = 0.0
    while start + WINDOW_S <= end:
        free = not any(start < b and a < start + WINDOW_S for a, b in used)
        window = [rows.get(start + ROW_S * k) for k in range(int(WINDOW_S // ROW_S))]
        if free and all(v is not None and v > 0 for v in window):
            vals = tuple(v for v in window if v is not None)
            candidates.append(Slice(file, start, max(vals) - min(vals), vals))
        start += STEP_S
    # Equal swings (windows sharing the same highest and lowest rows): the later start,
    # as the hand-run splits resolved them.
    candidates.sort(key=lambda s: (-s.swing_rps, -s.start_s))
    chosen: list[Slice] = []
    for cand in candidates:
        if not any(_overlaps(cand.start_s, c.start_s) for c in chosen):
            chosen.append(cand)
        if len(chosen) == n:
            break
    return chosen


def next_held_out(cases: Sequence[Case] = CASES, *, as_if_free: Iterable[str] = ()) -> list[Slice]:
    free = set(as_if_free)
    out: list[Slice] = []
    for file, n in QUOTA:
        used = [
            (c.start_s, c.start_s + (c.duration_s or 0.0))
            for c in cases
            if c.file == file and c.name not in free
        ]
        out += choose(file, n, rates(file), used)
    return out


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--as-if-free", nargs="*", default=[], metavar="NAME")
    args = ap.parse_args(argv)
    for s in next_held_out(as_if_free=args.as_if_free):
        h = s.start_h
        print(
            f"{s.file}: day {s.day}, {int(h):02d}:{round(h % 1 * 60):02d} for 1.5 h, "
            f"swing {s.swing_rps:,.0f} req/s; rows {', '.join(f'{v:,.0f}' for v in s.rates)}"
        )


if __name__ == "__main__":
    main()
