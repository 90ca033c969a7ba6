"""The summary tables docs/benchmarks.md and the closing notes quote, from a `make bench`
run's `bench/results/bench.json`: both tables (policy vs policy, system vs system) at
defaults with the oracle and the lower bound, and ours with its 95 % intervals.

    .venv/bin/python bench/tables.py [PATH]      # default: bench/results/bench.json

Cells are *scored 1-minute windows within the SLO / replica-seconds x the oracle's*, the
mean over the run's seeds. "(held out)" marks the cases held out when the run was made
(the `held_out` flag the run recorded, not the split in force now).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

DEFAULT = Path(__file__).resolve().parent / "results" / "bench.json"


def _label(name: str, case: dict[str, Any]) -> str:
    return f"{name} (held out)" if case.get("held_out") else name


def _cell(fig: dict[str, Any]) -> str:
    return f"{fig['slo_attainment_windows']:.1%} / {fig['excess_over_oracle'] + 1:.2f}x"


def policy_table(run: dict[str, Any], *, key: str, bound: bool) -> str:
    """`key`: "policies_gated" (policy vs policy) or "policies" (system vs system)."""
    cases = {n: c for n, c in run.items() if c.get("slo_feasible")}
    names = [p for p in next(iter(cases.values()))[key] if p != "oracle"] if cases else []
    head = ["case", *names] + (["oracle replica-s", "lower bound"] if bound else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, case in cases.items():
        row = [_label(name, case), *(_cell(case[key][p]) for p in names)]
        if bound:
            oracle = case[key]["oracle"]["replica_seconds"]
            row += [f"{oracle:,.0f}", f"{case['lower_bound_replica_seconds'] / oracle:.2f}x"]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def ours_table(run: dict[str, Any], *, ours: str = "modelscale") -> str:
    lines = [
        "| case | windows (mean [low, high]) | x oracle (mean [low, high]) "
        "| defaults goal met per seed |",
        "|---|---|---|---|",
    ]
    for name, case in run.items():
        if not case.get("slo_feasible"):
            continue
        fig, ci = case["policies_gated"][ours], case["intervals_gated"][ours]
        w, x = ci["slo_attainment_windows"], ci["excess_over_oracle"]
        per = case.get("defaults_goal_met_per_seed") or []
        lines.append(
            f"| {_label(name, case)} | {fig['slo_attainment_windows']:.1%} "
            f"[{w[0]:.1%}, {w[1]:.1%}] | {fig['excess_over_oracle'] + 1:.3f} "
            f"[{x[0] + 1:.3f}, {x[1] + 1:.3f}] | {sum(per)} of {len(per)} |"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    path = Path(argv[0]) if argv else DEFAULT
    if not path.exists():
        raise SystemExit(f"{path}: no such file; run `make bench` first")
    run: dict[str, Any] = json.loads(path.read_text())
    print("Policy vs policy (gated), at defaults:\n")
    print(policy_table(run, key="policies_gated", bound=True))
    print("\nSystem vs system (peers as deployed; ours is gated as deployed):\n")
    print(policy_table(run, key="policies", bound=False))
    print("\nOurs at defaults, 95 % intervals over the seeds:\n")
    print(ours_table(run))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
