"""`make bench`: every policy on every benchmark trace, one table per trace.

    .venv/bin/python bench/run.py [--case NAME ...] [--json FILE] [--plots DIR]

Each table row is what `modelscale simulate` prints for that trace (the exact command is
printed above the table), plus replica-seconds as a ratio to the oracle.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from cases import CASES, Case

from modelscale.simulate import suite
from modelscale.simulate import trace as trace_mod
from modelscale.simulate.figures import Figures

OUT = Path(__file__).resolve().parent / "results"


def markdown(figs: dict[str, Figures]) -> str:
    rows = [
        "| policy | requests in SLO | 1-min windows in SLO | replica-seconds | vs oracle "
        "| scale events | cold requests |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, f in figs.items():
        rows.append(
            f"| {name} | {f.slo_attainment_requests:.2%} | {f.slo_attainment_windows:.2%} "
            f"| {f.replica_seconds:,.0f} | {f.excess_over_oracle + 1:.2f}x "
            f"| {f.scale_events} | {f.cold_requests} |"
        )
    return "\n".join(rows)


def run_case(case: Case, plots: Path | None) -> dict[str, Figures]:
    tr = trace_mod.load(
        case.path, start_s=case.start_s, duration_s=case.duration_s, rate_scale=case.rate_scale
    )
    began = time.perf_counter()
    setup = suite.prepare(tr, dt=case.dt)
    runs = suite.run_all(setup)
    elapsed = time.perf_counter() - began
    figs = {n: f for n, (_, f) in runs.items()}
    print(f"### {case.name}\n")
    print(f"`modelscale simulate {' '.join(case.cli_args())}`\n")
    print(
        f"{tr.requests:,} requests over {tr.duration_s / 3600:.1f} h; one replica sustains "
        f"{setup.capacity_tokens:.0f} output tok/s within the SLO; oracle peak "
        f"{setup.peak_replicas} replicas (solved in {setup.oracle.rounds} rounds, meets SLO "
        f"in every window: {setup.oracle.meets_slo}); {elapsed:.1f} s for all policies"
        "\n"
    )
    print(markdown(figs))
    print(flush=True)
    if plots is not None:
        from modelscale.simulate import plot  # noqa: PLC0415 (matplotlib only if asked)

        plots.mkdir(parents=True, exist_ok=True)
        plot.write(
            plots / f"{case.name}.png", setup=setup, runs={n: r for n, (r, _) in runs.items()}
        )
    return figs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--case", action="append", choices=[c.name for c in CASES])
    parser.add_argument("--json", type=Path, help="also write all figures to this file")
    parser.add_argument("--plots", type=Path, help="write one PNG per trace into DIR")
    args = parser.parse_args()
    chosen = [c for c in CASES if not args.case or c.name in args.case]
    began = time.perf_counter()
    results = {c.name: run_case(c, args.plots) for c in chosen}
    print(f"total {time.perf_counter() - began:.1f} s")
    OUT.mkdir(parents=True, exist_ok=True)
    doc = {n: {p: f.to_dict() for p, f in figs.items()} for n, figs in results.items()}
    path = OUT / "bench.json"
    if args.case and path.exists():  # a partial re-run updates its cases, keeps the rest
        doc = {**json.loads(path.read_text()), **doc}
    path.write_text(json.dumps(doc, indent=1))
    if args.json:
        args.json.write_text(
            json.dumps(
                {n: {p: f.to_dict() for p, f in figs.items()} for n, figs in results.items()},
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
