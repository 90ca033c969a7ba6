"""`make bench-sweep`: every policy over the same grid of its own knob, and the goal check.

    .venv/bin/python bench/sweep.py [--case NAME ...] [--only POLICY ...] [--workers N]
        [--out DIR] [--cache DIR]

One tuning budget for everyone: each peer's target and ours' per-replica target (the
load-tested capacity) are multiplied by the same nine values (`suite.SWEEP`, 0.5 to 1.5);
peers run in both tables (gated and as deployed), ours once (it is gated as deployed);
static is searched without a cap. Per trace the goal is checked on the gated table at
>= 99 % of scored windows: ours at its best cheaper than every gated peer at its best and
within 1.15x the oracle; ours at its defaults >= 99 % and within 1.25x. Results go to
OUT/sweep.json and OUT/sweep-summary.md, one cost/attainment plot per trace.

`--only POLICY` re-runs only those policies' grid points and keeps every other policy's
points from the case's entry in OUT/sweep.json, if it has one (a peer's points do not
depend on ours, so after a change to our policy `--only modelscale` re-scores the goal in
minutes). Each
entry's `run_at` says when each policy's points were computed, and the summary is always
recomputed from the merged points.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from cases import CASES, Case
from run import BEST_ORACLE_RATIO, DEFAULTS_ORACLE_RATIO, best_goal, require_every_policy
from tune import prepared

from modelscale.simulate import figures, suite

OUT = Path(__file__).resolve().parent / "results"

_SETUP: suite.Setup | None = None


def merge_into(path: Path, results: dict[str, Any], *, replace: bool = False) -> dict[str, Any]:
    """Write `results` into the sweep file at `path` and return what it now holds: the
    file is read again under a lock and each case in `results` replaces its entry, so two
    sweeps of different cases running at once keep each other's cases (each used to write
    the file it had read at its start, and the last writer dropped the other's).
    `replace`: the file becomes `results` alone (a full sweep)."""
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        current: dict[str, Any] = (
            json.loads(path.read_text()) if path.exists() and not replace else {}
        )
        merged = {**current, **results}
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(merged, indent=1) + "\n")
        os.replace(tmp, path)
        return merged


def _init(setup: suite.Setup) -> None:
    global _SETUP  # noqa: PLW0603 (per-worker copy, set once by the pool initializer)
    _SETUP = setup


def _run(task: tuple[str, str, float]) -> suite.SweepPoint:
    assert _SETUP is not None
    return suite.run_sweep_task(_SETUP, task)


def table(points: list[suite.SweepPoint]) -> str:
    rows = [
        "| policy | table | setting | windows in SLO | requests in SLO | replica-seconds "
        "| vs oracle | events | cold |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for p in points:
        f = p.figures
        rows.append(
            f"| {p.policy} | {p.table} | {p.setting} | {f.slo_attainment_windows:.2%} "
            f"| {f.slo_attainment_requests:.2%} | {f.replica_seconds:,.0f} "
            f"| {f.excess_over_oracle + 1:.2f}x | {f.scale_events} | {f.cold_requests} |"
        )
    return "\n".join(rows)


def plot(case: str, points: list[dict[str, Any]], oracle_rs: float, path: Path) -> None:
    import matplotlib  # noqa: PLC0415 (only the sweep draws curves)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    from modelscale.simulate.plot import COLOURS  # noqa: PLC0415

    fig, axes = plt.subplots(1, 2, figsize=(13, 5), constrained_layout=True, sharey=True)
    for ax, tab in zip(axes, suite.TABLES, strict=True):
        for name in (suite.OURS, *suite.DEFAULT_PEERS):
            pts = sorted(
                (
                    p
                    for p in points
                    if p["policy"] == name and (p["table"] == tab or name == suite.OURS)
                ),
                key=lambda p: p["replica_seconds"],
            )
            ax.plot(
                [p["replica_seconds"] / oracle_rs for p in pts],
                [100 * p["slo_attainment_windows"] for p in pts],
                marker="o",
                color=COLOURS.get(name),
                label=name,
                lw=2.2 if name == suite.OURS else 1.0,
            )
        ax.axhline(100 * figures.TARGET_WINDOWS, color="black", ls="--", lw=0.8)
        ax.axvline(BEST_ORACLE_RATIO, color="black", ls=":", lw=0.8)
        ax.set_xlim(0.8, 4.0)
        ax.set_ylim(50, 101)
        ax.set_xlabel("replica-seconds / oracle (beyond 4x or below 50 % off the chart)")
        ax.set_title(f"{case}: {tab}")
    axes[0].set_ylabel("scored 1-minute windows within SLO (%)")
    axes[0].legend(fontsize=8)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def summary(results: dict[str, dict[str, Any]]) -> str:
    """Per trace and table: each policy's cheapest setting at >= 99 % of windows, as a
    multiple of the oracle (or the best attainment it reached), the bound beside it."""
    names = (suite.OURS, *suite.DEFAULT_PEERS, suite.STATIC)
    rows = [
        "| case | table | " + " | ".join(names) + " | oracle | lower bound |",
        "|---|---|" + "---|" * (len(names) + 2),
    ]
    for case, doc in results.items():
        oracle_rs = doc["oracle_replica_seconds"]
        for tab in suite.TABLES:
            # The split in force now (bench/cases.py), not the one the points were run in.
            held = next((c.held_out for c in CASES if c.name == case), doc["held_out"])
            cells = [case + (" (held out)" if held else ""), tab]
            for name in names:
                b = doc["best_at_target"][tab].get(name)
                if b is None:
                    cells.append("-")
                elif b["replica_seconds"] is None:
                    cells.append(f"never (best {b['slo_attainment_windows']:.1%})")
                else:
                    cells.append(f"{b['replica_seconds'] / oracle_rs:.2f}x ({b['setting']})")
            cells.append(f"{oracle_rs:,.0f} replica-s")
            cells.append(f"{doc['lower_bound_replica_seconds'] / oracle_rs:.2f}x")
            rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def kept_points(
    previous: dict[str, Any] | None, only: list[str] | None
) -> tuple[list[suite.SweepPoint], dict[str, str]]:
    """The points (and their `run_at`) of the policies not re-run, from a previous entry."""
    if not only or previous is None or not previous.get("points"):
        return [], {}
    fields = set(figures.Figures.__dataclass_fields__)
    kept = [
        suite.SweepPoint(
            p["policy"],
            p["table"],
            float(p["setting"].removeprefix("target x")),
            figures.Figures(**{k: v for k, v in p.items() if k in fields}),
        )
        for p in previous["points"]
        if p["policy"] not in only
    ]
    run_at = previous.get("run_at", {})
    return kept, {p.policy: run_at.get(p.policy, "before run_at was kept") for p in kept}


def sweep_case(
    case: Case,
    workers: int,
    out: Path,
    *,
    only: list[str] | None,
    previous: dict[str, Any] | None,
    cache: Path | None,
) -> tuple[bool, dict[str, Any]]:
    began = time.perf_counter()
    kept, run_at = kept_points(previous, only)
    setup = prepared(case.name, cache)
    if not setup.feasibility.feasible:
        print(
            f"### {case.name}\n\nSLO NOT attainable, nothing scored: {setup.feasibility.reason}\n"
        )
        return False, {"held_out": case.held_out, "slo_feasible": False}
    defaults = suite.run_tables(setup)
    todo = suite.sweep_tasks(only)
    with ProcessPoolExecutor(max_workers=workers, initializer=_init, initargs=(setup,)) as pool:
        points = kept + list(pool.map(_run, todo))
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    run_at |= {name: now for name, _, _ in todo}
    best = suite.best_at_target(setup, points, defaults)
    oracle_rs = setup.oracle_run.result.replica_seconds
    assert setup.lower_bound is not None
    ours = defaults["gated"][suite.OURS][1]
    d_ratio = ours.excess_over_oracle + 1
    d_met = ours.slo_attainment_windows >= figures.TARGET_WINDOWS and d_ratio <= (
        DEFAULTS_ORACLE_RATIO
    )
    b_met, lines = best_goal(best, oracle_rs)
    print(f"### {case.name}{' (held out)' if case.held_out else ''}\n")
    print(
        f"`modelscale simulate {' '.join(case.cli_args())} --sweep`; {len(todo)} runs in "
        f"{time.perf_counter() - began:.0f} s; oracle {oracle_rs:,.0f} replica-s, lower "
        f"bound {setup.lower_bound.replica_seconds:,.0f}\n"
    )
    print(table(points))
    print()
    print(f"Goal {'MET' if b_met and d_met else 'NOT met'} on {case.name}:")
    print("\n".join(lines))
    print(
        f"defaults: {ours.slo_attainment_windows:.2%} of windows at {d_ratio:.2f}x the oracle "
        f"({'met' if d_met else 'NOT met'})"
    )
    print(flush=True)
    raw = [
        {"policy": p.policy, "table": p.table, "setting": p.setting, **p.figures.to_dict()}
        for p in points
    ]
    plot(case.name, raw, oracle_rs, out / f"sweep-{case.name}.png")
    return b_met and d_met, {
        "held_out": case.held_out,
        "slo_feasible": True,
        "oracle_replica_seconds": oracle_rs,
        "oracle_meets_slo": setup.oracle_run.meets_slo,
        "lower_bound_replica_seconds": round(setup.lower_bound.replica_seconds, 1),
        "defaults": {
            t: {n: f.to_dict() for n, (_, f) in runs.items()} for t, runs in defaults.items()
        },
        "best_at_target": best,
        "run_at": run_at,
        "points": raw,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--case", action="append", choices=[c.name for c in CASES])
    parser.add_argument("--only", action="append", choices=[suite.OURS, *suite.PEER_NAMES])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--cache", type=Path, help="keep each prepared case as a pickle (as bench/tune.py)"
    )
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--replot", action="store_true", help="only redraw the curves from OUT/sweep.json"
    )
    args = parser.parse_args()
    if args.replot:
        for case, doc in json.loads((args.out / "sweep.json").read_text()).items():
            if doc.get("slo_feasible"):
                plot(
                    case,
                    doc["points"],
                    doc["oracle_replica_seconds"],
                    args.out / f"sweep-{case}.png",
                )
        return 0
    require_every_policy()
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "sweep.json"
    earlier: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    results: dict[str, Any] = {}
    verdicts: dict[str, bool] = {}
    for case in CASES:
        if args.case and case.name not in args.case:
            continue
        verdicts[case.name], results[case.name] = sweep_case(
            case,
            args.workers,
            args.out,
            only=args.only,
            previous=earlier.get(case.name),
            cache=args.cache,
        )
        # Written after every case: a long sweep interrupted keeps what it finished.
        merge_into(path, results)
    # A partial re-run updates its cases and keeps the rest (read again: another sweep
    # may have written since); a full sweep replaces the file.
    results = merge_into(path, results, replace=not (args.case or args.only))
    table_md = summary({k: v for k, v in results.items() if v.get("slo_feasible")})
    (args.out / "sweep-summary.md").write_text(table_md + "\n")
    print(f"Cheapest setting with >= {figures.TARGET_WINDOWS:.0%} of windows in SLO:\n")
    print(table_md)
    print(
        "goal per trace: "
        + ", ".join(f"{k}: {'met' if v else 'NOT met'}" for k, v in verdicts.items())
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
