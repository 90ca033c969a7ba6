"""`make bench`: every policy at its default settings on every benchmark trace, both tables.

    .venv/bin/python bench/run.py [--case NAME ...] [--seeds N] [--workers N] [--plots DIR]
    .venv/bin/python bench/run.py --refresh-best   # bench.md's at-best lines from sweep.json
    .venv/bin/python bench/run.py --smooth [...]   # the aggregate tuning cases, rate linear
                                                   # between window centres: bench-smooth.*
    .venv/bin/python bench/run.py --only modelscale [--case ...] [--cache DIR] [...]
                                                   # ours' rows alone, every other row kept

Per trace: the exact `modelscale simulate` command, the SLO feasibility verdict, the lower
bound beside the oracle, and two tables: policy vs policy (every peer behind the same
readiness gate as ours) and system vs system (peers as deployed). Tuning cases come first,
then the held-out ones (never used to tune anything). The goal check here is the defaults
half of the goal (ours at defaults >= 99 % of windows and within 1.25x the oracle); the
at-best half (cheaper than every gated peer at its best, within 1.15x) needs the sweep:
`make bench-sweep`, whose results this script also reads when they exist. Results go to
bench/results/bench.json and bench/results/bench.md; with `--case` only those cases are
re-run and put into both files, every other case kept as the last run wrote it (a
held-out run with the defaults unchanged: the tuning rows would come out identical).

With `--only POLICY` only that policy's rows (both tables, its intervals, and for ours the
defaults goal) are re-run and written into both files; every other row is kept as the
last full run wrote it. That is for a change to one policy alone (a freeze of ours'
defaults): the peers, the static fleet and the oracle do not read ours' settings, and the
replay is deterministic per seed, so their rows would come out identical. The run checks
that: each case's lower bound and oracle, computed again, must equal what bench.json
holds, or nothing is written (the simulator changed: run the full benchmark). `--cache
DIR` keeps each prepared case (load test, bound, oracle) as bench/tune.py does, in the
same files. Each re-run is recorded in the case's `rerun_alone` and in bench.md's tail.
Cases bench.json does not hold (a new split's held-out ones) are left out and named.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from cases import CASES, Case

from modelscale.simulate import bound, figures, suite
from modelscale.simulate import trace as trace_mod
from modelscale.simulate.engine import RunResult
from modelscale.simulate.figures import Figures, Interval

OUT = Path(__file__).resolve().parent / "results"
DEFAULTS_ORACLE_RATIO = 1.25
INTERVAL_FIELDS = ("slo_attainment_windows", "excess_over_oracle", "replica_seconds")
BEST_ORACLE_RATIO = 1.15
TITLES = {
    "gated": "Policy vs policy (every peer behind the same readiness gate as ours)",
    "as_deployed": "System vs system (peers as their users run them: traffic from container-ready)",
}


@dataclass
class CaseResult:
    """One case over all seeds: mean figures per table and policy, their intervals,
    and the per-seed facts the header reports."""

    case: Case
    requests: int = 0
    duration_s: float = 0.0
    feasible: bool = True
    reason: str = ""
    capacity_tokens: float = 0.0
    initial_replicas: int = 0
    lower_bound: list[float] = field(default_factory=list)
    oracle_meets: list[bool] = field(default_factory=list)
    windows_scored: int = 0
    tables: dict[str, dict[str, Figures]] = field(default_factory=dict)
    cis: dict[str, dict[str, dict[str, Interval]]] = field(default_factory=dict)
    # Per seed: did ours at defaults meet the defaults half of the goal on that seed?
    seeds_met: list[bool] = field(default_factory=list)
    elapsed_s: float = 0.0

    @property
    def bound_mean(self) -> float:
        return sum(self.lower_bound) / len(self.lower_bound) if self.lower_bound else 0.0


def load(case: Case, seed: int) -> trace_mod.Trace:
    return trace_mod.load(
        case.path,
        seed=seed,
        start_s=case.start_s,
        duration_s=case.duration_s,
        rate_scale=case.rate_scale,
        smooth=case.smooth,
    )


def prepare(case: Case, seed: int) -> suite.Setup:
    return suite.prepare(load(case, seed), dt=case.dt, seed=seed)


def prepared(case: Case, seed: int, cache: Path | None) -> suite.Setup:
    """`prepare`, kept in `cache` as a pickle when one is given (bench/tune.py's files)."""
    suffix = "" if seed == 0 else f"-seed{seed}"
    path = None if cache is None else cache / f"setup-{case.name}{suffix}.pkl"
    if path is not None and path.exists():
        setup: suite.Setup = pickle.loads(path.read_bytes())  # our own cache file
        return setup
    setup = prepare(case, seed)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pickle.dumps(setup))
    return setup


@dataclass
class AloneResult:
    """One case's re-run of some policies alone (`--only`), over all seeds."""

    case: Case
    tables: dict[str, dict[str, Figures]] = field(default_factory=dict)
    cis: dict[str, dict[str, dict[str, Interval]]] = field(default_factory=dict)
    seeds_met: list[bool] = field(default_factory=list)
    lower_bound: list[float] = field(default_factory=list)
    oracle_rs: list[float] = field(default_factory=list)
    feasible: bool = True
    elapsed_s: float = 0.0


def run_alone(case: Case, *, names: tuple[str, ...], seeds: int, cache: Path | None) -> AloneResult:
    """`names` alone on `case`, every seed (a worker process runs this)."""
    began = time.perf_counter()
    out = AloneResult(case)
    per: dict[str, dict[str, list[Figures]]] = {t: {} for t in suite.TABLES}
    for seed in range(seeds):
        try:
            setup = prepared(case, seed, cache)
        except bound.InfeasibleCapacityError:
            out.feasible = False
            break
        if not setup.feasibility.feasible:
            out.feasible = False
            break
        assert setup.lower_bound is not None
        out.lower_bound.append(setup.lower_bound.replica_seconds)
        out.oracle_rs.append(suite.evaluate(setup, setup.oracle_run.result).replica_seconds)
        runs = suite.run_tables(setup, names)
        for t in suite.TABLES:
            for n, (_, f) in runs[t].items():
                per[t].setdefault(n, []).append(f)
        if suite.OURS in names:
            out.seeds_met.append(meets_defaults_goal(runs["gated"][suite.OURS][1]))
    for t, pols in per.items():
        out.tables[t], out.cis[t] = {}, {}
        for n, fs in pols.items():
            out.tables[t][n], out.cis[t][n] = figures.aggregate(fs)
    out.elapsed_s = time.perf_counter() - began
    return out


def alone_mismatch(res: AloneResult, entry: dict[str, Any]) -> str | None:
    """Why `res` cannot be put beside the rows of bench.json's `entry`, or None: the
    feasibility, the seeds, the lower bound and the oracle must be those of the full run
    (the last two to 0.1 replica-s, as bench.json rounds them)."""
    name = res.case.name
    if res.feasible != bool(entry.get("slo_feasible")):
        return f"{name}: the SLO's feasibility differs from bench.json's"
    if not res.feasible:
        return None
    if len(res.lower_bound) != entry.get("seeds"):
        return f"{name}: {len(res.lower_bound)} seed(s) here, {entry.get('seeds')} in bench.json"
    bound_rs = round(sum(res.lower_bound) / len(res.lower_bound), 1)
    if abs(bound_rs - float(entry["lower_bound_replica_seconds"])) > 0.11:
        return (
            f"{name}: lower bound {bound_rs:,.1f} replica-s here, "
            f"{entry['lower_bound_replica_seconds']:,.1f} in bench.json"
        )
    oracle = round(sum(res.oracle_rs) / len(res.oracle_rs), 1)
    was = float(entry["policies_gated"][suite.ORACLE]["replica_seconds"])
    if abs(oracle - was) > 0.11:
        return f"{name}: oracle {oracle:,.1f} replica-s here, {was:,.1f} in bench.json"
    return None


def merge_alone(entry: dict[str, Any], res: AloneResult, *, date: str) -> dict[str, Any]:
    """bench.json's `entry` with the rows `res` re-ran put in, every other row kept."""
    out = json.loads(json.dumps(entry))
    if not res.feasible:
        return out
    for t, key in (("gated", "policies_gated"), ("as_deployed", "policies")):
        for n, f in res.tables[t].items():
            out[key][n] = f.to_dict()
    for n, ci in res.cis["gated"].items():
        out["intervals_gated"][n] = {
            k: [round(ci[k].low, 4), round(ci[k].high, 4)] for k in INTERVAL_FIELDS
        }
    if res.seeds_met:
        out["defaults_goal_met_per_seed"] = res.seeds_met
    for n in res.tables["gated"]:
        out.setdefault("rerun_alone", {})[n] = date
    return out


def patch_section(lines: list[str], res: AloneResult, *, seeds: int) -> list[str]:
    """A bench.md case section with the table rows of the policies `res` re-ran
    replaced, in each table, and ours' defaults-goal line if ours was among them."""
    if not res.feasible:
        return lines
    bound_rs = sum(res.lower_bound) / len(res.lower_bound)
    rows = {
        t: {
            n: markdown({n: f}, {n: res.cis[t][n]}, bound_rs=bound_rs, seeds=seeds).splitlines()[-1]
            for n, f in res.tables[t].items()
        }
        for t in suite.TABLES
    }
    goal = None
    if suite.OURS in res.tables["gated"]:
        shell = CaseResult(res.case, seeds_met=res.seeds_met)
        shell.tables["gated"] = res.tables["gated"]
        goal = f"Goal, {defaults_goal(shell)[1]}"
    out: list[str] = []
    table: str | None = None
    for line in lines:
        for t, title in TITLES.items():
            if line.startswith(title):
                table = t
        new = line
        if table is not None and line.startswith("| "):
            new = rows[table].get(line[2:].split(" |", 1)[0], line)
        if goal is not None and line.startswith("Goal, defaults:"):
            new = goal
        out.append(new)
    return out


def splice_alone(md: str, results: dict[str, AloneResult], *, seeds: int, tail: str) -> str:
    """bench.md with each re-run case's section patched (`patch_section`) and `tail`
    added after the run's total line; every other line as it was."""
    out: list[str] = []
    section: list[str] = []
    name: str | None = None

    def flush() -> None:
        out.extend(
            patch_section(section, results[name], seeds=seeds)
            if name is not None and name in results
            else section
        )
        section.clear()

    for line in md.rstrip("\n").splitlines():
        if line.startswith("### ") or line.startswith("## ") or line.startswith("total "):
            flush()
            name = section_name(line) if line.startswith("### ") else None
        section.append(line)
    flush()
    return "\n".join([*out, tail]) + "\n"


def run_case(
    case: Case, *, seeds: int, plots: Path | None = None
) -> tuple[CaseResult, suite.Setup]:
    began = time.perf_counter()
    out = CaseResult(case)
    per: dict[str, dict[str, list[Figures]]] = {t: {} for t in suite.TABLES}
    first: suite.Setup | None = None
    first_runs: dict[str, RunResult] = {}
    for seed in range(seeds):
        setup = prepare(case, seed)
        if first is None:
            first = setup
            out.requests, out.duration_s = setup.trace.requests, setup.trace.duration_s
            out.windows_scored = setup.feasibility.windows_scored
        if not setup.feasibility.feasible:
            out.feasible, out.reason = False, setup.feasibility.reason
            break
        runs = suite.run_tables(setup)
        if seed == 0:
            out.capacity_tokens = setup.capacity_tokens
            out.initial_replicas = setup.initial_replicas
            first_runs = {n: r for n, (r, _) in runs["gated"].items()}
        assert setup.lower_bound is not None
        out.lower_bound.append(setup.lower_bound.replica_seconds)
        out.oracle_meets.append(setup.oracle_run.meets_slo)
        for t in suite.TABLES:
            for n, (_, f) in runs[t].items():
                per[t].setdefault(n, []).append(f)
        out.seeds_met.append(meets_defaults_goal(runs["gated"][suite.OURS][1]))
    assert first is not None
    for t, pols in per.items():
        out.tables[t], out.cis[t] = {}, {}
        for n, fs in pols.items():
            out.tables[t][n], out.cis[t][n] = figures.aggregate(fs)
    out.elapsed_s = time.perf_counter() - began
    if plots is not None and out.feasible:
        from modelscale.simulate import plot  # noqa: PLC0415 (matplotlib only if asked)

        plots.mkdir(parents=True, exist_ok=True)
        plot.write(plots / f"{case.name}.png", setup=first, runs=first_runs)
    return out, first


def markdown(
    figs: dict[str, Figures], cis: dict[str, dict[str, Interval]], *, bound_rs: float, seeds: int
) -> str:
    pm = seeds > 1
    rows = [
        "| policy | requests in SLO | 1-min windows in SLO | replica-seconds | vs oracle "
        "| vs bound | scale events | cold requests |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, f in figs.items():
        ci = cis.get(name, {})
        win = f"{f.slo_attainment_windows:.2%}"
        rs = f"{f.replica_seconds:,.0f}"
        if pm and ci:
            win += f" ± {ci['slo_attainment_windows'].high - ci['slo_attainment_windows'].mean:.2%}"
            rs += f" ± {ci['replica_seconds'].high - ci['replica_seconds'].mean:,.0f}"
        vs_bound = f"{f.replica_seconds / bound_rs:.2f}x" if bound_rs > 0 else "-"
        vs_oracle = f"{f.excess_over_oracle + 1:.2f}x"
        if pm and ci:
            vs_oracle += f" ± {ci['excess_over_oracle'].high - ci['excess_over_oracle'].mean:.2f}"
        rows.append(
            f"| {name} | {f.slo_attainment_requests:.2%} | {win} | {rs} "
            f"| {vs_oracle} | {vs_bound} | {f.scale_events} "
            f"| {f.cold_requests} |"
        )
    return "\n".join(rows)


def meets_defaults_goal(ours: Figures) -> bool:
    return (
        ours.slo_attainment_windows >= figures.TARGET_WINDOWS
        and ours.excess_over_oracle + 1 <= DEFAULTS_ORACLE_RATIO
    )


def defaults_goal(res: CaseResult) -> tuple[bool, str]:
    ours = res.tables["gated"][suite.OURS]
    ratio = ours.excess_over_oracle + 1
    met = meets_defaults_goal(ours)
    seeds = len(res.seeds_met)
    return met, (
        f"defaults: modelscale {ours.slo_attainment_windows:.2%} of windows at {ratio:.2f}x "
        f"the oracle (goal >= {figures.TARGET_WINDOWS:.0%} and <= {DEFAULTS_ORACLE_RATIO}x): "
        f"{'met' if met else 'NOT met'}"
        + (
            f" on the mean of {seeds} seeds; met on {sum(res.seeds_met)} of {seeds} seeds"
            if seeds > 1
            else ""
        )
    )


def best_goal(best: dict[str, Any], oracle_rs: float) -> tuple[bool, list[str]]:
    """The at-best half of the goal, on the gated table of `best_at_target`."""
    gated = best["gated"]
    if suite.OURS not in gated:
        return False, ["at best: modelscale's grid was not run (sweep.py --only)"]
    ours = gated[suite.OURS]
    lines: list[str] = []
    if ours["replica_seconds"] is None:
        return False, [
            f"at best: modelscale never reaches {figures.TARGET_WINDOWS:.0%} (best "
            f"{ours['slo_attainment_windows']:.2%} at {ours['setting']}): NOT met"
        ]
    ratio = ours["replica_seconds"] / oracle_rs
    met = ratio <= BEST_ORACLE_RATIO
    lines.append(
        f"at best: modelscale {ours['replica_seconds']:,.0f} replica-s at {ours['setting']} "
        f"= {ratio:.2f}x the oracle ({'within' if met else 'NOT within'} {BEST_ORACLE_RATIO}x)"
    )
    for name in suite.DEFAULT_PEERS:
        b = gated.get(name)
        if b is None:
            continue
        if b["replica_seconds"] is None:
            lines.append(f"  {name}: never reaches {figures.TARGET_WINDOWS:.0%} on the grid")
            continue
        cheaper = ours["replica_seconds"] < b["replica_seconds"]
        met &= cheaper
        lines.append(
            f"  {name}: {b['replica_seconds']:,.0f} at {b['setting']}: ours "
            f"{'cheaper' if cheaper else 'NOT cheaper'} "
            f"({ours['replica_seconds'] / b['replica_seconds']:.2f}x)"
        )
    return met, lines


def header(res: CaseResult, seeds: int) -> str:
    case = res.case
    lines = [
        f"### {case.name}{HELD_OUT if case.held_out else ''}\n",
        f"`modelscale simulate {' '.join(case.cli_args())}`\n",
    ]
    if not res.feasible:
        lines.append(f"SLO NOT attainable, nothing scored: {res.reason}\n")
        return "\n".join(lines)
    oracle = res.tables["gated"][suite.ORACLE]
    lines.append(
        f"{res.requests:,} requests over {res.duration_s / 3600:.1f} h, "
        f"{res.windows_scored} windows scored; one replica sustains "
        f"{res.capacity_tokens:.0f} output tok/s within the SLO (load test); every policy "
        f"starts at {res.initial_replicas} replica(s). Lower bound {res.bound_mean:,.0f} "
        f"replica-s; oracle {oracle.replica_seconds:,.0f} "
        f"({oracle.replica_seconds / res.bound_mean:.2f}x the bound, meets the 99 % target: "
        f"{all(res.oracle_meets)}); {seeds} seed(s)"
        + (", ± = 95 % CI" if seeds > 1 else "")
        + f"; {res.elapsed_s:.0f} s\n"
    )
    return "\n".join(lines)


def render(res: CaseResult, seeds: int, best: dict[str, Any] | None) -> str:
    parts = [header(res, seeds)]
    if not res.feasible:
        return "\n".join(parts)
    for t in suite.TABLES:
        parts.append(f"{TITLES[t]}:\n")
        parts.append(markdown(res.tables[t], res.cis[t], bound_rs=res.bound_mean, seeds=seeds))
        parts.append("")
    _, line = defaults_goal(res)
    parts.append(f"Goal, {line}")
    if not res.case.smooth:  # the sweep runs the benchmark's cases, which step
        parts += best_lines(best, res.tables["gated"][suite.ORACLE].replica_seconds)
    parts.append("")
    return "\n".join(parts)


def best_lines(best: dict[str, Any] | None, oracle_rs: float) -> list[str]:
    """A case's at-best goal lines in bench.md, from its sweep entry if there is one."""
    if best is None:
        return [BEST_MISSING]
    met, lines = best_goal(best, oracle_rs)
    return [f"{BEST_PREFIX} (from bench-sweep): {'met' if met else 'NOT met'}", *lines]


BEST_PREFIX = "Goal, at best"
BEST_MISSING = f"{BEST_PREFIX}: run `make bench-sweep`"


HELD_OUT = " (held out)"
# A case held out when the full run wrote it, tuning since a later split.
HELD_OUT_WHEN_RUN = " (held out when run)"
TITLE = {
    False: "## Tuning cases (policy defaults may be tuned on these)",
    True: "## Held-out cases (never used to tune anything)",
}


def section_name(line: str) -> str:
    """The case a bench.md "### " header names, without its held-out mark."""
    return line[4:].removesuffix(HELD_OUT_WHEN_RUN).removesuffix(HELD_OUT).strip()


def splice(md: str, sections: dict[str, str], cases: Sequence[Case], tail: str) -> str:
    """bench.md with the cases of a partial run (`--case`) put in: each re-run case's
    section replaces its old one or is placed in CASES order within its group (tuning
    first, then held out); every other case's section is kept as the last run wrote it,
    its header marked "(held out when run)" if it was held out then and tunes now; the
    full run's total line is kept and `tail` (what was re-run, how long) added after it.
    Without this a held-out run with unchanged defaults needed the full 54-minute bench
    to reach bench.md, though every tuning case's row comes out identical."""
    old: dict[str, list[str]] = {}
    after: list[str] = []
    name: str | None = None
    for line in md.rstrip("\n").splitlines():
        if line.startswith("### "):
            name = section_name(line)
            old[name] = []
        elif line.startswith("## "):
            name = None
            continue
        elif name is None or line.startswith("total ") or line.startswith("re-run alone"):
            name = None
            if line.strip():
                after.append(line)
            continue
        if name is not None:
            old[name].append(line)
    out: list[str] = []
    for held in (False, True):
        group: list[str] = []
        for case in cases:
            if case.held_out is not held:
                continue
            if case.name in sections:
                group.append(sections[case.name].rstrip("\n") + "\n")
            elif case.name in old:
                lines = old[case.name]
                if not held and lines[0].endswith(HELD_OUT):
                    lines = [lines[0].removesuffix(HELD_OUT) + HELD_OUT_WHEN_RUN, *lines[1:]]
                group.append("\n".join(lines).rstrip("\n") + "\n")
        if group:
            out += [TITLE[held] + "\n", *group]
    return "\n".join(out) + "\n" + "\n".join([*after, tail]) + "\n"


def refresh_best(md: str, run: dict[str, Any], best: dict[str, Any]) -> str:
    """bench.md with each case's at-best lines rewritten from the sweep's results as they
    are now. The sweep usually finishes after `make bench` has written bench.md, so the
    lines the run wrote are those of the sweep before it; every other line is kept. The
    oracle each ratio is taken against is the run's (bench.json), as when it was written."""
    out: list[str] = []
    name: str | None = None
    skipping = False
    for line in md.splitlines():
        if line.startswith("### "):
            name = section_name(line)
        if skipping:
            if line.strip():
                continue
            skipping = False
        if line.startswith(BEST_PREFIX) and name in run and run[name].get("slo_feasible"):
            oracle_rs = run[name]["policies_gated"][suite.ORACLE]["replica_seconds"]
            out += best_lines(best.get(name), oracle_rs)
            skipping = True
            continue
        out.append(line)
    return "\n".join(out) + ("\n" if md.endswith("\n") else "")


def to_json(res: CaseResult) -> dict[str, Any]:
    return {
        "held_out": res.case.held_out,
        "slo_feasible": res.feasible,
        "reason": res.reason,
        "lower_bound_replica_seconds": round(res.bound_mean, 1) if res.lower_bound else None,
        "oracle_meets_slo": bool(res.oracle_meets) and all(res.oracle_meets),
        "initial_replicas": res.initial_replicas,
        "seeds": len(res.seeds_met),
        "defaults_goal_met_per_seed": res.seeds_met,
        "capacity_tokens_per_s": round(res.capacity_tokens, 1),
        "elapsed_s": round(res.elapsed_s, 1),
        **{
            ("policies" if t == "as_deployed" else "policies_gated"): {
                n: f.to_dict() for n, f in res.tables.get(t, {}).items()
            }
            for t in suite.TABLES
        },
        # 95 % intervals over the seeds (equal bounds with one seed), policy vs policy.
        "intervals_gated": {
            n: {k: [round(ci[k].low, 4), round(ci[k].high, 4)] for k in INTERVAL_FIELDS}
            for n, ci in res.cis.get("gated", {}).items()
        },
    }


def load_best() -> dict[str, Any]:
    path = OUT / "sweep.json"
    if not path.exists():
        return {}
    doc = json.loads(path.read_text())
    return {k: v["best_at_target"] for k, v in doc.items() if "best_at_target" in v}


def case_result(case: Case, seeds: int, plots: Path | None) -> CaseResult:
    """One case's result, or why it cannot be scored (a worker process runs this)."""
    try:
        return run_case(case, seeds=seeds, plots=plots)[0]
    except bound.InfeasibleCapacityError as err:
        return CaseResult(case, feasible=False, reason=str(err))


def require_every_policy() -> None:
    """The benchmark compares every policy: a peer that cannot load here (Dynamo's planner
    without the `peers` extra) stops it, instead of leaving a column out of the tables."""
    _, missing = suite.default_policies()
    if missing:
        sys.exit(
            "; ".join(missing)
            + ". `make bench` installs it; by hand: .venv/bin/pip install -e '.[peers]' "
            "&& .venv/bin/pip install --no-deps 'ai-dynamo==1.6.1'"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--case", action="append", choices=[c.name for c in CASES])
    parser.add_argument("--seeds", type=int, default=1, help="seeds per case (default 1)")
    parser.add_argument(
        "--workers", type=int, default=1, help="cases run in parallel processes (default 1)"
    )
    parser.add_argument("--plots", type=Path, help="write one PNG per trace into DIR")
    parser.add_argument(
        "--smooth",
        action="store_true",
        help="the aggregate cases with their rate linear between window centres instead of "
        "stepping at boundaries (a sensitivity check; results to bench-smooth.json/.md)",
    )
    parser.add_argument(
        "--only",
        action="append",
        choices=list(suite.DEFAULT_POLICIES),
        help="re-run only this policy (repeatable), keeping every other row of bench.json "
        "and bench.md; for a change to that policy alone",
    )
    parser.add_argument(
        "--cache",
        type=Path,
        help="with --only: keep each prepared case here (bench/tune.py's files)",
    )
    parser.add_argument(
        "--refresh-best",
        action="store_true",
        help="run nothing: rewrite bench.md's at-best lines from sweep.json as it is now",
    )
    args = parser.parse_args()
    if args.refresh_best:
        md, js = OUT / "bench.md", OUT / "bench.json"
        if not md.exists() or not js.exists():
            parser.error(f"--refresh-best: {md} and {js} come from `make bench`; run it first")
        md.write_text(refresh_best(md.read_text(), json.loads(js.read_text()), load_best()))
        return 0
    if not 1 <= args.seeds <= 30:
        parser.error("--seeds must be between 1 and 30")
    if not 1 <= args.workers <= 16:
        parser.error("--workers must be between 1 and 16")
    if args.cache is not None and not args.only:
        parser.error("--cache: only with --only (the full run prepares each case once)")
    if args.only:
        if args.smooth or args.plots:
            parser.error("--only: not with --smooth or --plots")
        return run_only(parser, args)
    require_every_policy()
    # Tuning cases first, then the held-out ones; each section in CASES order.
    chosen = [
        c
        for held in (False, True)
        for c in CASES
        if c.held_out is held
        if not args.case or c.name in args.case
    ]
    stem = "bench"
    if args.smooth:
        # Held-out cases stay out: a run on them reads their results.
        chosen = [replace(c, smooth=True) for c in chosen if c.aggregate and not c.held_out]
        if not chosen:
            parser.error("--smooth: no tuning case is an aggregate trace among those chosen")
        stem = "bench-smooth"
    best = load_best()
    began = time.perf_counter()
    results: dict[str, CaseResult] = {}
    md: list[str] = []
    sections: dict[str, str] = {}
    with ProcessPoolExecutor(args.workers) if args.workers > 1 else nullcontext() as pool:
        run = partial(case_result, seeds=args.seeds, plots=args.plots)
        done = pool.map(run, chosen) if pool is not None else map(run, chosen)
        for case, res in zip(chosen, done, strict=True):  # printed in order as they finish
            if not results or case.held_out is not chosen[len(results) - 1].held_out:
                print(TITLE[case.held_out] + "\n", flush=True)
                md.append(TITLE[case.held_out] + "\n")
            results[case.name] = res
            text = render(res, args.seeds, best.get(case.name))
            print(text, flush=True)
            md.append(text)
            sections[case.name] = text
    total = time.perf_counter() - began
    print(f"total {total:.0f} s")
    OUT.mkdir(parents=True, exist_ok=True)
    doc = {n: to_json(r) for n, r in results.items()}
    path = OUT / f"{stem}.json"
    if args.case and path.exists():  # a partial re-run updates its cases, keeps the rest
        doc = {**json.loads(path.read_text()), **doc}
    path.write_text(json.dumps(doc, indent=1) + "\n")
    page = OUT / f"{stem}.md"
    if not args.case:
        page.write_text("\n".join(md) + f"\ntotal {total:.0f} s\n")
    elif page.exists():
        tail = (
            f"re-run alone since, {time.strftime('%Y-%m-%d')}: {', '.join(sections)} "
            f"({args.seeds} seed(s), {total:.0f} s)"
        )
        page.write_text(splice(page.read_text(), sections, CASES, tail))
    return 0


def only_cases(
    cases: Sequence[Case], doc: dict[str, Any], named: Sequence[str] | None
) -> tuple[list[Case], list[str]]:
    """The cases `--only` re-runs (those named, or every case) that bench.json holds, and
    the names of those it does not: a case never run in full has no peers' rows to keep."""
    wanted = [c for c in cases if not named or c.name in named]
    return [c for c in wanted if c.name in doc], [c.name for c in wanted if c.name not in doc]


def run_only(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """`--only`: the named policies re-run on the chosen cases (all by default), put into
    bench.json and bench.md beside the rows the last full run wrote."""
    md_path, js_path = OUT / "bench.md", OUT / "bench.json"
    if not md_path.exists() or not js_path.exists():
        parser.error(f"--only: {md_path} and {js_path} come from `make bench`; run it first")
    doc = json.loads(js_path.read_text())
    names = tuple(dict.fromkeys(args.only))
    chosen, unrun = only_cases(CASES, doc, args.case)
    if args.case and unrun:
        parser.error(f"--only: not in {js_path} (run them in full first): {', '.join(unrun)}")
    if unrun:  # cases of a new split, never run: they need every policy's rows first
        print(
            f"--only: left out, not in {js_path} (run them in full first with "
            f"`bench/run.py --case NAME`): {', '.join(unrun)}",
            flush=True,
        )
    seeds = {doc[c.name].get("seeds") for c in chosen if doc[c.name].get("slo_feasible")}
    if seeds - {args.seeds}:
        parser.error(
            f"--only: bench.json's cases ran with {sorted(seeds)} seed(s); give as many "
            "(--seeds N, or SEEDS=N with make)"
        )
    began = time.perf_counter()
    results: dict[str, AloneResult] = {}
    with ProcessPoolExecutor(args.workers) if args.workers > 1 else nullcontext() as pool:
        run = partial(run_alone, names=names, seeds=args.seeds, cache=args.cache)
        done = pool.map(run, chosen) if pool is not None else map(run, chosen)
        for case, res in zip(chosen, done, strict=True):
            why = alone_mismatch(res, doc[case.name])
            if why is not None:
                sys.exit(f"--only: {why}; nothing written (the replay changed: run `make bench`)")
            results[case.name] = res
            if res.feasible:
                old = doc[case.name]["policies_gated"]
                print(
                    f"{case.name}: "
                    + "; ".join(
                        f"{n} {f.slo_attainment_windows:.2%} at {f.excess_over_oracle + 1:.3f}x"
                        f" (was {old[n]['slo_attainment_windows']:.2%} at "
                        f"{old[n]['excess_over_oracle'] + 1:.3f}x)"
                        for n, f in res.tables["gated"].items()
                    ),
                    flush=True,
                )
    total = time.perf_counter() - began
    date = time.strftime("%Y-%m-%d")
    for name, res in results.items():
        doc[name] = merge_alone(doc[name], res, date=date)
    js_path.write_text(json.dumps(doc, indent=1) + "\n")
    tail = (
        f"re-run alone since, {date}: {', '.join(names)} on {len(results)} case(s), every "
        f"other row from the run above ({args.seeds} seed(s), {total:.0f} s)"
    )
    md_path.write_text(splice_alone(md_path.read_text(), results, seeds=args.seeds, tail=tail))
    print(f"total {total:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
