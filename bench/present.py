"""`make bench-present`: what reacting perfectly, with no forecast, costs on every case.

    .venv/bin/python bench/present.py [--case NAME ...] [--workers N] [--cache DIR]
    .venv/bin/python bench/present.py --explain NAME --margin M [--cache DIR]

Without `--case` the tuning cases only (held-out ones run only when named: the report
replays ours on them), and only then are present.json / present.md rewritten.
Per case (seed 0, the sweep's seed): the oracle (knows the future), the present-knowing
reference at the cheapest margin that meets the 99 % window target in hindsight
(`simulate/present.py`: knows each minute's need as it begins, nothing after), ours at
its defaults replayed in this process, static-peak, and, from bench/results/sweep.json,
ours and the cheapest gated peer at their best. The reference's ratio to the oracle is
what a policy that reads the present perfectly but cannot see the future pays on that
trace; where it is above the issue's 1.15x, no reactive policy reaches the at-best goal
there, and only a forecast of what comes next could. Results go to
bench/results/present.json and present.md.

`--explain NAME --margin M` replays ours at its defaults on one case beside the reference
at margin M and says where the replicas differ: the mean replicas of ours, the reference
and the oracle's per-minute need, ours' learned capacity against the load test, its
measured forecast-error factor, and the reasons of its passes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import tune
from cases import CASES, TRACES

from modelscale.autoscaling import state as state_mod
from modelscale.simulate import bound, present, suite
from modelscale.simulate import ours as ours_mod
from modelscale.simulate import trace as trace_mod
from modelscale.simulate.engine import View

OUT = Path(__file__).resolve().parent / "results"
BEST_ORACLE_RATIO = 1.15
DAY_WINDOWS = 144  # 10-minute windows in a day
AGGREGATES = ("servegen_language_m-large_10min.csv.gz", "servegen_language_m-small_10min.csv.gz")


def _corr(a: np.ndarray, b: np.ndarray) -> float:
    ok = np.isfinite(a) & np.isfinite(b)
    return float(np.corrcoef(a[ok], b[ok])[0, 1])


def step_predictability(file: str) -> dict[str, float]:
    """How the aggregate's output token rate moves from one 10-minute window to the next
    (log ratio), and whether the same step a day earlier, or the mean of the same step on
    the 7 days before, predicts it (Pearson correlation): what any forecast from history
    could know of the steps the replay makes at window boundaries."""
    w = trace_mod.aggregate_windows(TRACES / file)
    out = w[:, 1] * w[:, 3]
    with np.errstate(divide="ignore", invalid="ignore"):
        steps = np.where((out[1:] > 0) & (out[:-1] > 0), np.log(out[1:] / out[:-1]), np.nan)
    ok = steps[np.isfinite(steps)]
    days = 7
    week = np.array(
        [
            np.nanmean(steps[i - DAY_WINDOWS * days : i : DAY_WINDOWS])
            for i in range(DAY_WINDOWS * days, steps.size)
        ]
    )
    return {
        "steps": int(ok.size),
        "sd_log_step": float(ok.std()),
        "share_up_over_20pct": float(np.mean(ok > np.log(1.2))),
        "largest_up": float(np.exp(ok.max()) - 1),
        "corr_same_step_day_before": _corr(steps[DAY_WINDOWS:], steps[:-DAY_WINDOWS]),
        "corr_mean_of_7_days_before": _corr(steps[DAY_WINDOWS * days :], week),
    }


def measure(name: str, cache: Path | None) -> dict[str, Any]:
    began = time.perf_counter()
    setup = tune.prepared(name, cache)
    oracle_rs = setup.oracle_run.result.replica_seconds
    search = suite.present_reference(setup)
    ours = suite.evaluate(setup, suite.run_policy(setup, suite.make_policy(suite.OURS, setup)))
    static = suite.evaluate(setup, suite.run_policy(setup, suite.make_policy(suite.STATIC, setup)))
    best = search.best
    return {
        "case": name,
        "oracle_replica_seconds": oracle_rs,
        "oracle_meets_slo": setup.oracle_run.meets_slo,
        "lower_bound_replica_seconds": (
            None if setup.lower_bound is None else setup.lower_bound.replica_seconds
        ),
        "present": None
        if best is None
        else {
            "margin": best.margin,
            "slo_attainment_windows": best.attainment,
            "replica_seconds": best.replica_seconds,
            "x_oracle": best.replica_seconds / oracle_rs,
        },
        "present_points": [p.__dict__ for p in search.points],
        "ours_defaults": {
            "slo_attainment_windows": ours.slo_attainment_windows,
            "replica_seconds": ours.replica_seconds,
            "x_oracle": ours.replica_seconds / oracle_rs,
        },
        "static_peak": {
            "replicas": setup.static_replicas,
            "slo_attainment_windows": static.slo_attainment_windows,
            "x_oracle": static.replica_seconds / oracle_rs,
        },
        "elapsed_s": round(time.perf_counter() - began, 1),
    }


def at_best(sweep: dict[str, Any], name: str) -> tuple[float | None, str | None, float | None]:
    """From sweep.json: ours at best (x oracle) and the cheapest gated peer at best."""
    case = sweep.get(name)
    if not case:
        return None, None, None
    gated = case["best_at_target"]["gated"]
    oracle_rs = case["oracle_replica_seconds"]

    def ratio(entry: dict[str, Any]) -> float | None:
        rs = entry.get("replica_seconds")
        return None if rs is None else rs / oracle_rs

    ours = ratio(gated.get(suite.OURS, {}))
    peers = {
        p: r
        for p, e in gated.items()
        if p not in (suite.OURS, suite.STATIC, suite.ORACLE) and (r := ratio(e)) is not None
    }
    if not peers:
        return ours, None, None
    peer = min(peers, key=lambda p: peers[p])
    return ours, peer, peers[peer]


def fmt(x: float | None) -> str:
    return "never" if x is None else f"{x:.2f}x"


def report(rows: list[dict[str, Any]], sweep: dict[str, Any]) -> str:
    margin = next(
        (r["present_one_margin"]["margin"] for r in rows if r.get("present_one_margin")), None
    )
    one = "one margin" if margin is None else f"at +{margin:.3f} on every case"
    lines = [
        "| case | oracle replica-s | reference at its own margin (hindsight): margin, windows, "
        f"x oracle | reference {one}: windows / x oracle | ours at defaults (this run) "
        "| ours at best (sweep) | cheapest gated peer at best (sweep) | static-peak |",
        "|---|---|---|---|---|---|---|---|",
    ]
    above, cheaper = [], []
    for r in rows:
        held = next(c for c in CASES if c.name == r["case"]).held_out
        name = r["case"] + (" (held out)" if held else "")
        p = r["present"]
        ref = (
            "never (margin 0 .. 2)"
            if p is None
            else f"+{p['margin']:.3f}, {p['slo_attainment_windows']:.1%}, {p['x_oracle']:.2f}x"
        )
        if p is None or p["x_oracle"] > BEST_ORACLE_RATIO:
            above.append(r["case"])
        o = r["ours_defaults"]
        if p is not None and p["x_oracle"] < o["x_oracle"]:
            cheaper.append(r["case"])
        fixed = r.get("present_one_margin")
        fixed_cell = (
            "-"
            if fixed is None
            else f"{fixed['slo_attainment_windows']:.1%} / {fixed['x_oracle']:.2f}x"
        )
        ours_best, peer, peer_x = at_best(sweep, r["case"])
        peer_cell = "never" if peer is None else f"{peer} {peer_x:.2f}x"
        s = r["static_peak"]
        lines.append(
            f"| {name} | {r['oracle_replica_seconds']:,.0f} | {ref} | {fixed_cell} | "
            f"{o['slo_attainment_windows']:.1%} / {o['x_oracle']:.2f}x | {fmt(ours_best)} | "
            f"{peer_cell} | {s['x_oracle']:.2f}x ({s['replicas']}) |"
        )
    lines += [
        "",
        f"At its own margin the reference is above {BEST_ORACLE_RATIO}x the oracle (or never "
        f"meets the target) on {len(above)} of {len(rows)} cases: {', '.join(above) or 'none'}. "
        f"It is cheaper than ours at defaults on {len(cheaper)}: {', '.join(cheaper) or 'none'}.",
    ]
    return "\n".join(lines)


def steps_report(steps: dict[str, dict[str, float]]) -> str:
    lines = [
        "| aggregate trace | 10-min steps | sd of log step | steps up > 20 % | largest up "
        "| corr. with the same step a day before | with the mean of the 7 days before |",
        "|---|---|---|---|---|---|---|",
    ]
    for f, s in steps.items():
        lines.append(
            f"| {f} | {s['steps']:,} | {s['sd_log_step']:.3f} | {s['share_up_over_20pct']:.1%} "
            f"| +{s['largest_up']:.0%} | {s['corr_same_step_day_before']:.2f} "
            f"| {s['corr_mean_of_7_days_before']:.2f} |"
        )
    return "\n".join(lines)


def measure_at(name: str, cache: Path | None, margin: float) -> dict[str, Any]:
    """The reference on one case at a margin chosen elsewhere."""
    setup = tune.prepared(name, cache)
    point = suite.present_replay(setup)(margin)
    return {
        "case": name,
        "margin": margin,
        "slo_attainment_windows": point.attainment,
        "x_oracle": point.replica_seconds / setup.oracle_run.result.replica_seconds,
    }


def one_margin(rows: list[dict[str, Any]]) -> float | None:
    """One margin for every case, chosen as a default is (bench/cases.py's rule): the
    largest any tuning case needed, from the tuning cases only."""
    tuning = {c.name for c in CASES if not c.held_out}
    found = [r["present"]["margin"] for r in rows if r["case"] in tuning and r["present"]]
    return max(found) if found else None


class Traced:
    """Ours as the simulator drives it, recording each pass: time, replicas asked for,
    learned capacity, measured error factor, reason."""

    def __init__(self, inner: ours_mod.Modelscale) -> None:
        self.inner = inner
        self.name = inner.name
        self.interval_s = inner.interval_s
        self.warmup_gate = inner.warmup_gate
        self.passes: list[tuple[float, int, float, float | None, str]] = []

    def decide(self, view: View) -> int:
        replicas = self.inner.decide(view)
        config = self.inner.config
        model = state_mod.load(self.inner.state.model, config=config)
        cap = state_mod.capacity_model(config).capacity(
            model.cap, target=config.target_tokens_per_replica
        )
        reason = "" if self.inner.last is None else self.inner.last.reason
        self.passes.append(
            (
                view.now,
                replicas,
                cap,
                state_mod.ERRORS.factor(model.err, z=config.forecast_error_z),
                reason,
            )
        )
        return replicas


def explain(name: str, cache: Path | None, margin: float) -> str:
    """Ours at defaults beside the reference at `margin` on one case (see the docstring)."""
    setup = tune.prepared(name, cache)
    inner = suite.make_policy(suite.OURS, setup)
    assert isinstance(inner, ours_mod.Modelscale)
    traced = Traced(inner)
    result = suite.run_policy(setup, traced)
    passes = traced.passes
    times = np.arange(0.0, setup.trace.duration_s + present.INTERVAL_S, present.INTERVAL_S)
    need = bound.trailing_fluid_load(setup.trace, params=setup.params, slo=setup.slo, times=times)
    ref = present.PresentOracle(
        times=times, need=need, margin=margin, hold_s=setup.params.horizon_s
    )
    oracle_need = setup.oracle_run.need
    at = [oracle_need[min(int(t // 60), oracle_need.size - 1)] for t, *_ in passes]
    factors = [f for *_, f, _ in passes if f is not None]
    oracle_rs = setup.oracle_run.result.replica_seconds
    ours_mean = np.mean([r for _, r, *_ in passes])
    ref_mean = np.mean([ref.replicas_at(t) for t, *_ in passes])
    capacity = np.median([c for _, _, c, *_ in passes])
    factor = f"{np.mean(factors):.3f}" if factors else "none (too few forecasts scored)"
    reasons = Counter(r for *_, r in passes).most_common()
    return "\n".join(
        [
            f"{name}: ours at defaults {result.replica_seconds / oracle_rs:.3f}x the oracle",
            f"mean replicas at its passes: ours {ours_mean:.2f}, reference at +{margin:g} "
            f"{ref_mean:.2f}, the oracle's per-minute need {np.mean(at):.2f}",
            f"ours' learned capacity: median {capacity:.0f} tok/s per replica "
            f"(load test {setup.sizing.tokens_per_s:.0f})",
            f"measured forecast-error factor: mean {factor}",
            "reasons: " + ", ".join(f"{r} {n}" for r, n in reasons),
        ]
    )


def default_cases() -> list[str]:
    """The cases run without `--case`: the tuning cases. The report replays ours at its
    defaults, and a result of ours on a held-out case read before a freeze makes it a
    tuning case (bench/cases.py), so a held-out case runs only when named."""
    return [c.name for c in CASES if not c.held_out]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--case", action="append", choices=[c.name for c in CASES])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cache", type=Path, help="prepared cases, as bench/tune.py keeps them")
    parser.add_argument("--explain", choices=[c.name for c in CASES], metavar="NAME")
    parser.add_argument("--margin", type=float, help="with --explain: the reference's margin")
    args = parser.parse_args()
    if args.explain:
        if args.margin is None or args.margin < 0:
            parser.error("--explain needs --margin M >= 0 (the case's margin in present.md)")
        print(explain(args.explain, args.cache, args.margin))
        return 0
    names = args.case or default_cases()
    began = time.perf_counter()
    with ProcessPoolExecutor(max_workers=max(1, args.workers)) as pool:
        futures = [pool.submit(measure, n, args.cache) for n in names]
        rows = []
        for f in futures:
            row = f.result()
            rows.append(row)
            p, o = row["present"], row["ours_defaults"]
            ref = "never" if p is None else f"+{p['margin']:.3f} {p['x_oracle']:.3f}x"
            print(
                f"{row['case']:26s} reference {ref}  ours defaults {o['x_oracle']:.3f}x"
                f" {o['slo_attainment_windows']:.1%}  ({row['elapsed_s']:.0f} s)",
                flush=True,
            )
        margin = one_margin(rows)
        fixed = (
            []
            if margin is None
            else list(pool.map(measure_at, names, [args.cache] * len(names), [margin] * len(names)))
        )
    for row, at in zip(rows, fixed, strict=False):
        row["present_one_margin"] = at
    steps = {f: step_predictability(f) for f in AGGREGATES}
    sweep_path = OUT / "sweep.json"
    sweep = json.loads(sweep_path.read_text()) if sweep_path.exists() else {}
    table = report(rows, sweep) + "\n\n" + steps_report(steps)
    print()
    print(table)
    print(f"\n{time.perf_counter() - began:.0f} s wall")
    if args.case is None:
        OUT.mkdir(exist_ok=True)
        (OUT / "present.json").write_text(
            json.dumps({"cases": rows, "aggregate_steps": steps}, indent=1) + "\n"
        )
        (OUT / "present.md").write_text(
            "# The present-knowing reference (bench/present.py, seed 0)\n\n" + table + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
