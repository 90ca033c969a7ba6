"""`bench/run.py`: a benchmark that cannot run every default policy stops and says how to
install it, and with several seeds the defaults goal says on how many it was met (a mean
can pass while a seed misses)."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

import run  # bench/ is a scripts directory, put on the path above
from cases import CASES

from modelscale.simulate import figures as figures_mod
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


def test_refresh_best_rewrites_only_the_at_best_lines_from_the_sweep_as_it_is_now() -> None:
    md = "\n".join(
        [
            "## Tuning cases (policy defaults may be tuned on these)\n",
            "### a\n",
            "| policy | x |",
            "| oracle | 1 |\n",
            "Goal, defaults: modelscale 100.00% of windows at 1.10x the oracle",
            "Goal, at best (from bench-sweep): NOT met",
            "at best: modelscale never reaches 99% (best 98.00% at target x1): NOT met",
            "",
            "### b (held out)\n",
            "Goal, defaults: modelscale 97.00% of windows at 1.20x the oracle",
            "Goal, at best: run `make bench-sweep`",
            "",
            "total 10 s",
            "",
        ]
    )
    gated = {"policies_gated": {suite.ORACLE: {"replica_seconds": 1000.0}}}
    run_doc = {"a": {"slo_feasible": True, **gated}, "b": {"slo_feasible": True, **gated}}
    point = {"slo_attainment_windows": 1.0}
    best = {
        "b": {
            "gated": {
                suite.OURS: {**point, "replica_seconds": 1100.0, "setting": "target x1"},
                "hpa": {**point, "replica_seconds": 1200.0, "setting": "target x1.25"},
            }
        }
    }
    out = run.refresh_best(md, run_doc, best)
    lines = out.splitlines()
    # a: no sweep entry any more, so the run's stale verdict is replaced, not kept.
    assert "Goal, at best: run `make bench-sweep`" in lines[lines.index("### a") :]
    assert "modelscale never reaches" not in out
    # b: the sweep's entry, against the run's oracle: 1.10x, cheaper than HPA at its best.
    assert "Goal, at best (from bench-sweep): met" in out
    assert "at best: modelscale 1,100 replica-s at target x1 = 1.10x the oracle" in out
    assert "  hpa: 1,200 at target x1.25: ours cheaper (0.92x)" in out
    # Everything else is as the run wrote it.
    assert out.count("Goal, defaults:") == 2 and out.endswith("total 10 s\n")
    assert "| oracle | 1 |" in out


def test_a_partial_run_puts_its_cases_into_bench_md_and_keeps_every_other_section() -> None:
    tuning = [c for c in CASES if not c.held_out][:3]
    held = [c for c in CASES if c.held_out][:2]
    t0, t1, t2 = (c.name for c in tuning)
    h0, h1 = (c.name for c in held)
    md = "\n".join(
        [
            run.TITLE[False] + "\n",
            f"### {t0}\n",
            "old t0 row",
            "",
            f"### {t2}{run.HELD_OUT}\n",  # held out when the full run wrote it
            "old t2 row",
            "Goal, at best: run `make bench-sweep`",
            "",
            run.TITLE[True] + "\n",
            f"### {h1}{run.HELD_OUT}\n",
            "old h1 row",
            "",
            "total 3229 s",
            "",
        ]
    )
    new = {h0: f"### {h0}{run.HELD_OUT}\n\nnew h0 row\n", t0: f"### {t0}\n\nnew t0 row\n"}
    out = run.splice(md, new, [*tuning, *held], "re-run alone since, today: h0, t0")
    lines = out.splitlines()
    # Re-run cases replace their sections; t1, never written, stays absent.
    assert "old t0 row" not in out and "new t0 row" in out and t1 not in out
    # Every case in CASES order within its group, tuning first.
    order = [run.section_name(line) for line in lines if line.startswith("### ")]
    assert order == [t0, t2, h0, h1]
    assert lines.index(run.TITLE[False]) < lines.index(f"### {t0}")
    assert lines.index(f"### {t2}{run.HELD_OUT_WHEN_RUN}") < lines.index(run.TITLE[True])
    # A case that tunes now keeps its rows, marked as held out when they were run.
    assert f"### {h1}{run.HELD_OUT}" in lines and "old t2 row" in out and "old h1 row" in out
    # The full run's total stays; the partial run says what it re-ran after it.
    assert out.endswith("total 3229 s\nre-run alone since, today: h0, t0\n")
    # Spliced again, the page is stable, and refresh_best still finds the renamed case.
    again = run.splice(out, {}, [*tuning, *held], "re-run alone since, today: nothing")
    assert again.count("### ") == 4 and "total 3229 s\nre-run alone since, today: h0" in again
    assert run.section_name(f"### {t2}{run.HELD_OUT_WHEN_RUN}") == t2


def alone(case_name: str, ours_figs: Figures, *, oracle_rs: float = 1000.0) -> run.AloneResult:
    """A `--only modelscale` result: ours in both tables, 3 seeds, the given oracle."""
    case = next(c for c in CASES if c.name == case_name)
    res = run.AloneResult(case, lower_bound=[500.0] * 3, oracle_rs=[oracle_rs] * 3)
    for table in suite.TABLES:
        fig, cis = figures_mod.aggregate([ours_figs] * 3)
        res.tables[table], res.cis[table] = {suite.OURS: fig}, {suite.OURS: cis}
    res.seeds_met = [run.meets_defaults_goal(ours_figs)] * 3
    return res


def test_a_run_of_ours_alone_replaces_its_rows_and_goal_and_keeps_every_peer_row() -> None:
    """`--only modelscale`: after a freeze of ours' defaults, only ours' rows, intervals and
    defaults goal change, in bench.json and in both tables of bench.md; every peer's row
    stays as the full run wrote it, the page says what was re-run, and a run whose oracle
    differs from the full run's (the replay changed) is refused."""
    name = next(c.name for c in CASES if not c.held_out)
    full = run.CaseResult(next(c for c in CASES if c.name == name), seeds_met=[False] * 3)
    full.lower_bound, full.oracle_meets, full.feasible = [500.0] * 3, [True] * 3, True
    peer = replace(ours(0.995, 1.30), scale_events=7)
    oracle = replace(ours(1.0, 1.0), replica_seconds=1000.0)
    for table in suite.TABLES:
        full.tables[table], full.cis[table] = {}, {}
        for n, f in ((suite.OURS, ours(0.98, 1.40)), ("hpa", peer), (suite.ORACLE, oracle)):
            full.tables[table][n], full.cis[table][n] = figures_mod.aggregate([f] * 3)
    md = "\n".join([run.TITLE[False] + "\n", run.render(full, 3, None), "total 99 s", ""])
    entry = run.to_json(full)
    res = alone(name, ours(1.0, 1.20))
    assert run.alone_mismatch(res, entry) is None
    merged = run.merge_alone(entry, res, date="2026-12-06")
    assert merged["policies_gated"][suite.OURS]["excess_over_oracle"] == pytest.approx(0.2)
    assert merged["policies"][suite.OURS] == merged["policies_gated"][suite.OURS]
    assert merged["policies_gated"]["hpa"] == entry["policies_gated"]["hpa"]
    assert merged["defaults_goal_met_per_seed"] == [True] * 3
    assert merged["rerun_alone"] == {suite.OURS: "2026-12-06"}
    assert entry["defaults_goal_met_per_seed"] == [False] * 3  # the input is not touched
    out = run.splice_alone(md, {name: res}, seeds=3, tail="re-run alone since, today")
    before, after = md.splitlines(), out.splitlines()
    changed = [(a, b) for a, b in zip(before, after, strict=False) if a != b]
    ours_rows = [b for _, b in changed if b.startswith(f"| {suite.OURS} |")]
    assert len(ours_rows) == 2 and all("1.20x" in row for row in ours_rows)
    goal = [b for _, b in changed if b.startswith("Goal, defaults:")]
    assert len(goal) == 1 and ": met on the mean of 3 seeds; met on 3 of 3 seeds" in goal[0]
    assert len(changed) == 3  # nothing else: the peers' rows, the header, the titles
    assert after[-2:] == ["total 99 s", "re-run alone since, today"]
    moved = alone(name, ours(1.0, 1.20), oracle_rs=1010.0)
    why = run.alone_mismatch(moved, entry)
    assert why is not None and "oracle 1,010.0 replica-s here, 1,000.0 in bench.json" in why


def test_a_run_of_ours_alone_leaves_out_cases_never_run_in_full_and_names_them() -> None:
    """A new split's held-out cases are not in bench.json until they run in full: `--only`
    over every case re-runs the others and names these; asked for by name, they stop it
    (main() turns the returned names into an error)."""
    doc = {c.name: {} for c in CASES if not c.held_out}
    new = [c.name for c in CASES if c.held_out]
    chosen, unrun = run.only_cases(CASES, doc, None)
    assert [c.name for c in chosen] == list(doc) and unrun == new
    chosen, unrun = run.only_cases(CASES, doc, [new[0], next(iter(doc))])
    assert [c.name for c in chosen] == [next(iter(doc))] and unrun == [new[0]]
