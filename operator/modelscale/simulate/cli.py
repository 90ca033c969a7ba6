"""`modelscale simulate`: replay a trace through the replica model under each policy."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from modelscale.simulate import suite
from modelscale.simulate import trace as trace_mod
from modelscale.simulate.figures import Figures
from modelscale.simulate.replica import ReplicaParams, Slo


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, exit 2, like every other bad input
        self.exit(2, f"modelscale simulate: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    defaults, slo = ReplicaParams(), Slo()
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
        help=f"policy to run (repeatable; default all): {', '.join(suite.POLICIES)}",
    )
    p.add_argument(
        "--slo-ttft",
        type=float,
        default=slo.ttft_s,
        metavar="S",
        help=f"P99 time-to-first-token target in seconds (default {slo.ttft_s:g})",
    )
    p.add_argument(
        "--slo-tpot",
        type=float,
        default=slo.tpot_s,
        metavar="S",
        help=f"P99 time-per-output-token target in seconds (default {slo.tpot_s:g})",
    )
    p.add_argument("--seed", type=int, default=0, help="seed for Poisson replay (default 0)")
    p.add_argument(
        "--start",
        type=float,
        default=0.0,
        metavar="S",
        help="skip this many seconds of the trace first",
    )
    p.add_argument(
        "--duration",
        type=float,
        default=None,
        metavar="S",
        help="replay only this many seconds (default: all)",
    )
    p.add_argument(
        "--rate-scale",
        type=float,
        default=1.0,
        metavar="X",
        help="multiply the request rate (aggregates: Poisson rate; per-request: "
        "thin or superpose copies)",
    )
    p.add_argument(
        "--startup",
        type=float,
        default=defaults.startup_s,
        metavar="S",
        help=f"replica start-up L in seconds (default {defaults.startup_s:g})",
    )
    p.add_argument(
        "--warmup",
        type=float,
        default=defaults.warmup_s,
        metavar="S",
        help=f"replica warm-up W in seconds (default {defaults.warmup_s:g})",
    )
    p.add_argument(
        "--dt",
        type=float,
        default=0.5,
        metavar="S",
        help="simulation tick in seconds (default 0.5; 1.0 halves the run time "
        "of multi-hour aggregate slices)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--plot", metavar="OUT.png", help="write a PNG of load, replicas and P99")
    return p


def to_json(trace_name: str, figs: dict[str, Figures]) -> dict[str, Any]:
    return {"trace": trace_name, "policies": {name: f.to_dict() for name, f in figs.items()}}


def table(figs: dict[str, Figures]) -> str:
    head = (
        f"{'policy':<12} {'req SLO':>8} {'win SLO':>8} {'replica-s':>10} "
        f"{'vs oracle':>9} {'events':>6} {'cold':>6}"
    )
    lines = [head, "-" * len(head)]
    for name, f in figs.items():
        lines.append(
            f"{name:<12} {f.slo_attainment_requests:>8.2%} {f.slo_attainment_windows:>8.2%} "
            f"{f.replica_seconds:>10.0f} {f.excess_over_oracle + 1:>8.2f}x "
            f"{f.scale_events:>6d} {f.cold_requests:>6d}"
        )
    return "\n".join(lines)


def _fail(message: str) -> int:
    print(f"modelscale simulate: error: {message}", file=sys.stderr)
    return 2


def main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(list(argv))
    if args.slo_ttft <= 0 or args.slo_tpot <= 0:
        return _fail("--slo-ttft and --slo-tpot must be > 0")
    if not 0.05 <= args.dt <= 2.0:
        return _fail("--dt must be between 0.05 and 2 seconds")
    if args.startup < 0 or args.warmup < 0:
        return _fail("--startup and --warmup must be >= 0")
    if args.plot and Path(args.plot).parent != Path() and not Path(args.plot).parent.is_dir():
        return _fail(f"--plot directory {Path(args.plot).parent} does not exist")
    try:
        tr = trace_mod.load(
            args.trace,
            seed=args.seed,
            start_s=args.start,
            duration_s=args.duration,
            rate_scale=args.rate_scale,
        )
    except trace_mod.TraceError as err:
        return _fail(str(err))
    names = tuple(dict.fromkeys(args.policy)) if args.policy else suite.POLICIES
    params = ReplicaParams(startup_s=args.startup, warmup_s=args.warmup)
    began = time.perf_counter()
    setup = suite.prepare(
        tr,
        params=params,
        slo=Slo(ttft_s=args.slo_ttft, tpot_s=args.slo_tpot),
        dt=args.dt,
        seed=args.seed,
    )
    runs = suite.run_all(setup, names)
    elapsed = time.perf_counter() - began
    figs = {name: f for name, (_, f) in runs.items()}
    if args.json:
        print(json.dumps(to_json(tr.name, figs)))
    else:
        print(
            f"trace {tr.name}: {tr.requests} requests over {tr.duration_s:.0f} s; replica "
            f"capacity {setup.capacity_tokens:.0f} output tok/s within P99 TTFT "
            f"{args.slo_ttft:g} s / TPOT {args.slo_tpot:g} s; L+W {params.horizon_s:.0f} s"
        )
        print(table(figs))
        print(f"({len(names)} policies in {elapsed:.1f} s)")
    if args.plot:
        from modelscale.simulate import plot  # noqa: PLC0415 (matplotlib only when asked)

        plot.write(args.plot, setup=setup, runs={n: r for n, (r, _) in runs.items()})
    return 0
