"""What `modelscale simulate` prints about a serving policy: per policy run, each
priority class's attainment, P99 TTFT and shed requests (JSON and text)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from modelscale.simulate.engine import RunResult
from modelscale.simulate.serving import ServingPolicy


def to_json(policy: ServingPolicy, runs: Mapping[str, RunResult]) -> dict[str, Any]:
    """The policy and, per policy run, what each class got."""
    return {
        "classes": [dataclasses.asdict(c) for c in policy.classes],
        "ordered": policy.ordered,
        "per_class": {name: {c.name: c.to_dict() for c in r.classes} for name, r in runs.items()},
    }


def table(policy: ServingPolicy, runs: Mapping[str, RunResult]) -> list[str]:
    spec = ", ".join(
        f"{c.name} {c.share:g}"
        + (f" queue<={c.max_queue}" if c.max_queue is not None else "")
        + (f" timeout {c.timeout_s:g}s" if c.timeout_s is not None else "")
        for c in policy.classes
    )
    head = f"{'policy':<12} {'class':<12} {'req SLO':>8} {'P99 TTFT':>9} {'shed':>7} {'shed %':>7}"
    lines = ["", f"serving policy ({spec}; first seed, gated table):", head, "-" * len(head)]
    for name, run in runs.items():
        for c in run.classes:
            att = f"{c.attainment:>8.2%}" if c.attainment is not None else f"{'-':>8}"
            p99 = f"{c.p99_ttft_s:>8.2f}s" if math.isfinite(c.p99_ttft_s) else f"{'inf':>9}"
            share = f"{c.shed / c.requests:>7.2%}" if c.requests else f"{'-':>7}"
            lines.append(f"{name:<12} {c.name:<12} {att} {p99} {c.shed:>7d} {share}")
    return lines
