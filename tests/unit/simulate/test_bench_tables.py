"""`bench/tables.py`: the summary tables quoted in docs/benchmarks.md come from a run's
bench.json as the run recorded it: every policy's windows and cost per case, the oracle
and the bound beside them, the held-out label the run had, and infeasible cases left out."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

import tables  # bench/ is a scripts directory, put on the path above


def fig(windows: float, ratio: float, rs: float) -> dict[str, float]:
    return {
        "slo_attainment_windows": windows,
        "excess_over_oracle": ratio - 1.0,
        "replica_seconds": rs,
    }


def case(held_out: bool) -> dict[str, object]:
    policies = {
        "modelscale": fig(0.989, 1.46, 1460.0),
        "hpa": fig(1.0, 1.18, 1180.0),
        "oracle": fig(1.0, 1.0, 1000.0),
    }
    return {
        "held_out": held_out,
        "slo_feasible": True,
        "lower_bound_replica_seconds": 740.0,
        "policies_gated": policies,
        "policies": policies,
        "intervals_gated": {
            "modelscale": {
                "slo_attainment_windows": [0.94, 1.03],
                "excess_over_oracle": [0.35, 0.57],
            }
        },
        "defaults_goal_met_per_seed": [False, True, False],
    }


def test_the_tables_show_each_case_as_the_run_recorded_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = {"a": case(False), "b": case(True), "c": {"slo_feasible": False}}
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(run))
    assert tables.main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "| a | 98.9% / 1.46x | 100.0% / 1.18x | 1,000 | 0.74x |" in out
    assert "| b (held out) | 98.9% / 1.46x | 100.0% / 1.18x | 1,000 | 0.74x |" in out
    assert "| b (held out) | 98.9% [94.0%, 103.0%] | 1.460 [1.350, 1.570] | 1 of 3 |" in out
    assert "| c " not in out  # not scored: the SLO was not attainable


def test_a_missing_run_says_to_run_the_benchmark(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="make bench"):
        tables.main([str(tmp_path / "none.json")])
