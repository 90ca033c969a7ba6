"""`bench/sweep.py --only POLICY`: the other policies' points are kept from sweep.json.

A peer's grid points do not depend on our policy, so after a policy change only ours are
re-run; what is kept must be exactly the earlier points of the policies not re-run, with
the time each was computed, and nothing at all when the case has no earlier entry."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

import sweep  # bench/ is a scripts directory, put on the path above

FIG = {
    "slo_attainment_requests": 1.0,
    "slo_attainment_windows": 0.99,
    "replica_seconds": 1234.0,
    "excess_over_oracle": 0.2,
    "scale_events": 3,
    "cold_requests": 0,
    "windows_scored": 59,
    "windows_unscored": 1,
}


def entry() -> dict[str, object]:
    return {
        "points": [
            {"policy": "hpa", "table": "gated", "setting": "target x1.125", **FIG},
            {"policy": "hpa", "table": "as_deployed", "setting": "target x0.5", **FIG},
            {"policy": "modelscale", "table": "gated", "setting": "target x1", **FIG},
        ],
        "run_at": {"hpa": "2026-12-01T21:20:51Z", "modelscale": "2026-12-01T20:00:00Z"},
    }


def test_only_ours_keeps_the_peers_points_with_their_times() -> None:
    kept, run_at = sweep.kept_points(entry(), ["modelscale"])
    assert [(p.policy, p.table, p.scale) for p in kept] == [
        ("hpa", "gated", 1.125),
        ("hpa", "as_deployed", 0.5),
    ]
    assert kept[0].figures.replica_seconds == pytest.approx(1234.0)
    assert kept[0].setting == "target x1.125"
    assert run_at == {"hpa": "2026-12-01T21:20:51Z"}


def test_no_earlier_entry_or_no_only_keeps_nothing() -> None:
    assert sweep.kept_points(None, ["modelscale"]) == ([], {})
    assert sweep.kept_points(entry(), None) == ([], {})


def test_points_from_before_run_at_was_kept_say_so() -> None:
    old = entry()
    del old["run_at"]
    _, run_at = sweep.kept_points(old, ["modelscale"])
    assert run_at == {"hpa": "before run_at was kept"}
