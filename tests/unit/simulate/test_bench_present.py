"""`bench/present.py`: the one margin for every case is chosen as a default is, from the
tuning cases only, and the report counts where reacting perfectly is beyond the goal."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

import present  # bench/ is a scripts directory, put on the path above
from cases import CASES


def row(case: str, margin: float | None, x_oracle: float, ours: float) -> dict[str, Any]:
    return {
        "case": case,
        "oracle_replica_seconds": 1000.0,
        "present": None
        if margin is None
        else {"margin": margin, "slo_attainment_windows": 1.0, "x_oracle": x_oracle},
        "ours_defaults": {"slo_attainment_windows": 1.0, "x_oracle": ours},
        "static_peak": {"replicas": 2, "slo_attainment_windows": 1.0, "x_oracle": 1.3},
    }


def test_one_margin_comes_from_the_tuning_cases_only() -> None:
    tuning = next(c.name for c in CASES if not c.held_out)
    held = next(c.name for c in CASES if c.held_out)
    rows = [row(tuning, 0.5, 1.1, 1.2), row(held, 1.9, 1.1, 1.2)]
    assert present.one_margin(rows) == 0.5  # the held-out case's larger margin is not seen
    assert present.one_margin([row(held, 1.9, 1.1, 1.2)]) is None


def test_report_counts_cases_beyond_the_goal_and_cheaper_than_ours() -> None:
    names = [c.name for c in CASES[:3]]
    rows = [
        row(names[0], 0.3, 1.10, 1.20),  # within 1.15x, cheaper than ours
        row(names[1], 0.7, 1.30, 1.25),  # beyond 1.15x, dearer than ours
        row(names[2], None, 0.0, 1.40),  # never meets the target
    ]
    text = present.report(rows, sweep={})
    assert f"on 2 of 3 cases: {names[1]}, {names[2]}" in text
    assert f"cheaper than ours at defaults on 1: {names[0]}" in text
    assert "never (margin 0 .. 2)" in text


def test_without_a_case_list_only_the_tuning_cases_run() -> None:
    """`make bench-present` replays ours at its defaults; on a held-out case that reads it
    before any freeze, so the default list leaves the held-out cases out."""
    names = present.default_cases()
    assert names == [c.name for c in CASES if not c.held_out]
    assert not {c.name for c in CASES if c.held_out} & set(names)
