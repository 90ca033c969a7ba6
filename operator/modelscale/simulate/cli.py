"""`modelscale simulate`: replay a trace through the replica model under each policy."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from modelscale.simulate import bound, engine, figures, serving, serving_report, suite
from modelscale.simulate import trace as trace_mod
from modelscale.simulate.figures import Figures, Interval
from modelscale.simulate.replica import ReplicaParams, Slo
from modelscale.simulate.serving import ServingPolicy, ServingPolicyError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, exit 2, like every other bad input
        self.exit(2, f"modelscale simulate: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    defaults, slo = ReplicaParams(), suite.DEFAULT_SLO
    p = _Parser(
        prog="modelscale simulate",
        description="Replay an LLM-serving trace through a replica model under modelscale's "
        "policy and peers' autoscalers; print SLO attainment and GPU cost per policy.",
    )
    p.add_argument(
        "--trace",
        required=True,
        metavar="FILE",
        help="per-request CSV (t_s,input_tokens,output_tokens) or 10-minute "
        "aggregate CSV (window_start_s,total_rps,...), gzipped or not",
    )
    p.add_argument(
        "--policy",
        action="append",
        choices=suite.POLICIES,
        metavar="NAME",
        help=f"policy to run (repeatable; default: {', '.join(suite.DEFAULT_POLICIES)}); "
        f"any of {', '.join(suite.POLICIES)}",
    )
    for flag, default, metavar, help_ in (
        (
            "--slo-ttft",
            slo.ttft_s,
            "S",
            f"P99 time-to-first-token target in seconds (default {slo.ttft_s:g})",
        ),
        (
            "--slo-ttft-per-1k",
            slo.ttft_per_1k_input_s,
            "S",
            "TTFT allowance per 1,000 prompt tokens: a request's TTFT target is "
            f"--slo-ttft + this x prompt/1000 (default {slo.ttft_per_1k_input_s:g})",
        ),
        (
            "--slo-tpot",
            slo.tpot_s,
            "S",
            f"P99 time-per-output-token target in seconds (default {slo.tpot_s:g})",
        ),
    ):
        p.add_argument(flag, type=float, default=default, metavar=metavar, help=help_)
    p.add_argument("--seed", type=int, default=0, help="first seed for Poisson replay (default 0)")
    p.add_argument(
        "--seeds",
        type=int,
        default=1,
        metavar="N",
        help="replay N seeds (--seed, --seed+1, ...) and report means with 95%% confidence "
        "intervals: aggregate traces re-draw Poisson arrivals, scaled per-request traces "
        "re-draw copy shifts (default 1)",
    )
    later: tuple[tuple[str, float | None, str, str], ...] = (
        (
            "--start",
            0.0,
            "S",
            "skip this many seconds of the trace first",
        ),
        (
            "--duration",
            None,
            "S",
            "replay only this many seconds (default: all)",
        ),
        (
            "--rate-scale",
            1.0,
            "X",
            "multiply the request rate (aggregates: Poisson rate; per-request: "
            "thin or superpose copies)",
        ),
        (
            "--startup",
            defaults.startup_s,
            "S",
            f"replica start-up L in seconds (default {defaults.startup_s:g})",
        ),
        (
            "--warmup",
            defaults.warmup_s,
            "S",
            f"replica warm-up W in seconds (default {defaults.warmup_s:g})",
        ),
        (
            "--dt",
            0.5,
            "S",
            "simulation tick in seconds (default 0.5; 1.0 halves the run time "
            "of multi-hour aggregate slices)",
        ),
    )
    for flag, initial, metavar, help_ in later:
        p.add_argument(flag, type=float, default=initial, metavar=metavar, help=help_)
    p.add_argument(
        "--smooth",
        action="store_true",
        help="aggregate traces: move the rate linearly between window centres instead of "
        "stepping at window boundaries (a sensitivity check: the series keeps only means)",
    )
    p.add_argument(
        "--sweep",
        action="store_true",
        help="also sweep every policy's target over the same multipliers "
        f"({', '.join(f'{x:g}' for x in suite.SWEEP)}) and report each one's cheapest "
        "setting at >= 99%% of windows (best_at_target)",
    )
    serving_flags = p.add_argument_group(
        "serving policy",
        "priority classes with a per-pod queue limit and a queue timeout (REJECT: a request "
        "over either is refused at once and counted); pods admit in class order",
    )
    serving_flags.add_argument(
        "--priority-split",
        metavar="CLASS=SHARE,...",
        help="priority classes, highest first, with the share of requests each gets where "
        "the trace has no priority column (a `priority` column, 1 = the first class, wins), "
        "e.g. interactive=0.5,batch=0.5; default: no serving policy",
    )
    serving_flags.add_argument(
        "--max-queue",
        metavar="CLASS=N,...",
        help="per pod, the most requests of a class that may wait; one more is refused",
    )
    serving_flags.add_argument(
        "--queue-timeout",
        metavar="CLASS=S,...",
        help="seconds a request of a class may wait for admission before it is refused",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--plot", metavar="OUT.png", help="write a PNG of load, replicas and P99")
    return p


TABLE_TITLES = {
    "gated": "policy vs policy: every peer behind the same readiness gate as ours",
    "as_deployed": "system vs system: peers as their users run them (traffic from container-ready)",
}

Cis = dict[str, dict[str, dict[str, Interval]]]  # table -> policy -> figure -> interval


@dataclass
class Outcome:
    """Everything one `modelscale simulate` run reports, over all seeds."""

    trace: trace_mod.Trace
    seeds: int
    slo: Slo
    feasibility: bound.Feasibility
    setup: suite.Setup  # the first seed's
    tables: dict[str, dict[str, Figures]]
    cis: Cis
    lower_bound: list[float]  # per seed
    oracle_meets: list[bool]
    runs: dict[str, engine.RunResult]  # the first seed's gated runs, for --plot
    best: dict[str, dict[str, dict[str, float | str | None]]] | None = None
    serving: ServingPolicy | None = None


def _ratio_key(figs: Figures) -> str:
    return f"{figs.excess_over_oracle + 1:>8.2f}x"


def table(figs: dict[str, Figures], cis: dict[str, dict[str, Interval]] | None = None) -> str:
    head = (
        f"{'policy':<12} {'req SLO':>8} {'win SLO':>8} {'±':>6} {'replica-s':>10} {'±':>7} "
        f"{'vs oracle':>9} {'events':>6} {'cold':>6}"
    )
    lines = [head, "-" * len(head)]
    for name, f in figs.items():
        ci = (cis or {}).get(name)
        win_pm = (
            f"{ci['slo_attainment_windows'].high - ci['slo_attainment_windows'].mean:>6.2%}"
            if ci
            else f"{'-':>6}"
        )
        rs_pm = (
            f"{ci['replica_seconds'].high - ci['replica_seconds'].mean:>7.0f}"
            if ci
            else f"{'-':>7}"
        )
        lines.append(
            f"{name:<12} {f.slo_attainment_requests:>8.2%} {f.slo_attainment_windows:>8.2%} "
            f"{win_pm} {f.replica_seconds:>10.0f} {rs_pm} {_ratio_key(f)} "
            f"{f.scale_events:>6d} {f.cold_requests:>6d}"
        )
    return "\n".join(lines)


def to_json(out: Outcome) -> dict[str, Any]:
    feas = out.feasibility
    doc: dict[str, Any] = {
        "trace": out.trace.name,
        "seeds": out.seeds,
        "slo": {
            "ttft_s": out.slo.ttft_s,
            "ttft_per_1k_input_s": out.slo.ttft_per_1k_input_s,
            "tpot_s": out.slo.tpot_s,
        },
        "slo_feasible": feas.feasible,
        "windows": {
            "scored": feas.windows_scored,
            "unattainable": feas.windows_unattainable,
            "allowed_to_fail": feas.windows_allowed_to_fail,
            "min_requests": figures.MIN_REQUESTS,
        },
        "lower_bound_replica_seconds": (
            round(float(np.mean(out.lower_bound)), 1) if out.lower_bound else None
        ),
        "oracle_meets_slo": bool(out.oracle_meets) and all(out.oracle_meets),
        "initial_replicas": out.setup.initial_replicas,
        "policies": {n: f.to_dict() for n, f in out.tables["as_deployed"].items()},
        "policies_gated": {n: f.to_dict() for n, f in out.tables["gated"].items()},
        "ci95": {
            t: {
                n: {k: [round(ci.low, 4), round(ci.high, 4)] for k, ci in per.items()}
                for n, per in pol.items()
            }
            for t, pol in out.cis.items()
        },
    }
    if not feas.feasible:
        doc["reason"] = feas.reason
    if out.serving is not None:
        doc["serving"] = serving_report.to_json(out.serving, out.runs)
    if out.best is not None:
        doc["best_at_target"] = out.best
    return doc


def _fail(message: str) -> int:
    print(f"modelscale simulate: error: {message}", file=sys.stderr)
    return 2


def _mean_points(per_seed: list[list[suite.SweepPoint]]) -> list[suite.SweepPoint]:
    keyed: dict[tuple[str, str, float], list[Figures]] = {}
    for points in per_seed:
        for p in points:
            keyed.setdefault((p.policy, p.table, p.scale), []).append(p.figures)
    return [
        suite.SweepPoint(name, tab, scale, figures.aggregate(fs)[0])
        for (name, tab, scale), fs in keyed.items()
    ]


def simulate(
    args: argparse.Namespace, names: tuple[str, ...], params: ReplicaParams, slo: Slo
) -> Outcome:
    """Every seed: load, check feasibility, prepare, run both tables (and the sweep)."""
    per_table: dict[str, dict[str, list[Figures]]] = {t: {} for t in suite.TABLES}
    bounds: list[float] = []
    meets: list[bool] = []
    sweeps: list[list[suite.SweepPoint]] = []
    first: tuple[trace_mod.Trace, suite.Setup, dict[str, engine.RunResult]] | None = None
    for seed in range(args.seed, args.seed + args.seeds):
        tr = trace_mod.load(
            args.trace,
            seed=seed,
            start_s=args.start,
            duration_s=args.duration,
            rate_scale=args.rate_scale,
            smooth=args.smooth,
        )
        setup = suite.prepare(tr, params=params, slo=slo, dt=args.dt, seed=seed)
        runs = suite.run_tables(setup, names)
        if first is None:
            first = (tr, setup, {n: r for n, (r, _) in runs["gated"].items()})
        if not setup.feasibility.feasible:
            break
        assert setup.lower_bound is not None
        bounds.append(setup.lower_bound.replica_seconds)
        meets.append(setup.oracle_run.meets_slo)
        for t in suite.TABLES:
            for n, (_, f) in runs[t].items():
                per_table[t].setdefault(n, []).append(f)
        if args.sweep:
            points = [suite.run_sweep_task(setup, task) for task in suite.sweep_tasks(names)]
            sweeps.append(points)
    assert first is not None
    tr, setup, gated_runs = first
    tables: dict[str, dict[str, Figures]] = {t: {} for t in suite.TABLES}
    cis: Cis = {t: {} for t in suite.TABLES}
    for t, pols in per_table.items():
        for n, fs in pols.items():
            tables[t][n], cis[t][n] = figures.aggregate(fs)
    best = None
    if args.sweep and setup.feasibility.feasible:
        defaults = {t: {n: (gated_runs[n], tables[t][n]) for n in tables[t]} for t in tables}
        best = suite.best_at_target(setup, _mean_points(sweeps), defaults)
    return Outcome(
        trace=tr,
        seeds=len(bounds) or 1,
        slo=slo,
        feasibility=setup.feasibility,
        setup=setup,
        tables=tables,
        cis=cis,
        lower_bound=bounds,
        oracle_meets=meets,
        runs=gated_runs,
        best=best,
        serving=params.serving,
    )


def report(out: Outcome, *, params: ReplicaParams, elapsed: float) -> str:
    tr, feas, slo = out.trace, out.feasibility, out.slo
    per_1k = (
        f" + {slo.ttft_per_1k_input_s:g} s per 1k prompt tokens" if slo.ttft_per_1k_input_s else ""
    )
    lines = [
        f"trace {tr.name}: {tr.requests} requests over {tr.duration_s:.0f} s; SLO P99 TTFT "
        f"{slo.ttft_s:g} s{per_1k}, TPOT {slo.tpot_s:g} s; L+W {params.horizon_s:.0f} s; "
        f"{feas.windows_scored} windows scored (>= {figures.MIN_REQUESTS} requests)"
    ]
    if not feas.feasible:
        lines.append(f"SLO NOT attainable, nothing scored: {feas.reason}")
        return "\n".join(lines)
    setup = out.setup
    oracle_rs = out.tables["gated"].get(suite.ORACLE)
    lb = float(np.mean(out.lower_bound))
    lines.append(
        f"replica capacity {setup.capacity_tokens:.0f} output tok/s (load test); every policy "
        f"starts at {setup.initial_replicas} replica(s); lower bound {lb:,.0f} replica-s"
        + (
            f", oracle {oracle_rs.replica_seconds:,.0f} ({oracle_rs.replica_seconds / lb:.2f}x "
            f"the bound)"
            if oracle_rs is not None and lb > 0
            else ""
        )
        + f"; oracle meets the 99% target: {all(out.oracle_meets)}"
        + (f"; {out.seeds} seeds, ± = 95% CI" if out.seeds > 1 else "")
    )
    for t in suite.TABLES:
        lines += ["", TABLE_TITLES[t], table(out.tables[t], out.cis[t] if out.seeds > 1 else None)]
    if out.serving is not None:
        lines += serving_report.table(out.serving, out.runs)
    if out.best is not None:
        for t in suite.TABLES:
            lines += ["", f"cheapest setting at >= 99% of windows ({t}):"]
            for n, b in out.best[t].items():
                rs = b["replica_seconds"]
                lines.append(
                    f"  {n:<12} "
                    + (
                        f"{rs:>10,.0f} replica-s at {b['setting']}"
                        if isinstance(rs, float)
                        else f"never (best {b['slo_attainment_windows']:.2%} at {b['setting']})"
                    )
                )
    lines.append(f"({elapsed:.1f} s)")
    return "\n".join(lines)


def _serving(args: argparse.Namespace) -> ServingPolicy | None:
    if args.priority_split is None:
        if args.max_queue or args.queue_timeout:
            raise ServingPolicyError(
                "--max-queue and --queue-timeout need --priority-split (the classes they name)"
            )
        return None
    return serving.from_flags(
        split=args.priority_split,
        max_queue=args.max_queue,
        timeout=args.queue_timeout,
        seed=args.seed,
    )


def main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(list(argv))
    if args.slo_ttft <= 0 or args.slo_tpot <= 0:
        return _fail("--slo-ttft and --slo-tpot must be > 0")
    if args.slo_ttft_per_1k < 0:
        return _fail("--slo-ttft-per-1k must be >= 0")
    if not 1 <= args.seeds <= 30:
        return _fail("--seeds must be between 1 and 30")
    if not 0.05 <= args.dt <= 2.0:
        return _fail("--dt must be between 0.05 and 2 seconds")
    if args.startup < 0 or args.warmup < 0:
        return _fail("--startup and --warmup must be >= 0")
    if args.plot and Path(args.plot).parent != Path() and not Path(args.plot).parent.is_dir():
        return _fail(f"--plot directory {Path(args.plot).parent} does not exist")
    if args.policy:
        names = tuple(dict.fromkeys(args.policy))
        if missing := [r for n in names if (r := suite.unavailable(n))]:
            return _fail(f"{missing[0]}; install it with `make bench` or pip install -e '.[peers]'")
        notes: list[str] = []
    else:
        names, notes = suite.default_policies()
    if suite.ORACLE not in names:  # every figure is relative to it
        names = (*names, suite.ORACLE)
    try:
        policy = _serving(args)
    except ServingPolicyError as err:
        return _fail(str(err))
    params = ReplicaParams(startup_s=args.startup, warmup_s=args.warmup, serving=policy)
    slo = Slo(ttft_s=args.slo_ttft, tpot_s=args.slo_tpot, ttft_per_1k_input_s=args.slo_ttft_per_1k)
    began = time.perf_counter()
    try:
        out = simulate(args, names, params, slo)
    except (trace_mod.TraceError, bound.InfeasibleCapacityError, ServingPolicyError) as err:
        return _fail(str(err))
    elapsed = time.perf_counter() - began
    for note in notes:
        print(f"modelscale simulate: note: {note}; not run", file=sys.stderr)
    if args.json:
        print(json.dumps(to_json(out)))
    else:
        print(report(out, params=params, elapsed=elapsed))
    if args.plot and out.feasibility.feasible:
        from modelscale.simulate import plot  # noqa: PLC0415 (matplotlib only when asked)

        plot.write(args.plot, setup=out.setup, runs=out.runs)
    return 0
