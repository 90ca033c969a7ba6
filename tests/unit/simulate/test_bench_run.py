"""`bench/run.py`: a benchmark that cannot run every default policy stops and says how to
install it, and with several seeds the defaults goal says on how many it was met (a mean
can pass while a seed misses)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

import run  # bench/ is a scripts directory, put on the path above
from cases import CASES

from modelscale.simulate import suite
from modelscale.simulate.figures import Figures


def test_a_default_policy_that_cannot_load_stops_the_benchmark_with_the_install_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    note = "dynamo-kalman needs NVIDIA Dynamo's planner (No module named 'dynamo')"
    monkeypatch.setattr(suite, "default_policies", lambda: (("modelscale",), [note]))
    with pytest.raises(SystemExit) as stopped:
        run.require_every_policy()
    message = str(stopped.value.code)
    assert note in message
    assert "make bench" in message and "ai-dynamo==1.6.1" in message


def ours(windows: float, ratio: float) -> Figures:
    return Figures(
        slo_attainment_requests=1.0,
        slo_attainment_windows=windows,
        replica_seconds=1000.0 * ratio,
        excess_over_oracle=ratio - 1.0,
        scale_events=3,
        cold_requests=0,
        windows_scored=90,
        windows_unscored=0,
    )


def test_the_defaults_goal_counts_the_seeds_it_was_met_on() -> None:
    seeds = [ours(1.0, 1.20), ours(1.0, 1.24), ours(0.978, 1.10)]
    res = run.CaseResult(CASES[0], seeds_met=[run.meets_defaults_goal(f) for f in seeds])
    res.tables["gated"] = {suite.OURS: ours(0.9927, 1.18)}  # the mean of the three
    met, line = run.defaults_goal(res)
    assert met
    assert line.endswith("met on the mean of 3 seeds; met on 2 of 3 seeds")
    one = run.CaseResult(CASES[0], seeds_met=[False])
    one.tables["gated"] = {suite.OURS: ours(1.0, 1.26)}
    met, line = run.defaults_goal(one)
    assert not met and "seeds" not in line
