"""PNG of a simulation: load, replicas per policy, and P99 TTFT / TPOT against the SLO.

matplotlib is imported here only, so the rest of the simulator (and the operator) never
loads it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from modelscale.simulate import figures
from modelscale.simulate.engine import RunResult
from modelscale.simulate.suite import Setup

COLOURS = {
    "modelscale": "#d62728",
    "hpa": "#1f77b4",
    "keda": "#17becf",
    "knative-kpa": "#9467bd",
    "aibrix-apa": "#ff7f0e",
    "static-peak": "#7f7f7f",
    "oracle": "#2ca02c",
}


def write(path: str | Path, *, setup: Setup, runs: dict[str, RunResult]) -> None:
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    tr = setup.trace
    fig, axes = plt.subplots(4, 1, figsize=(12, 11), sharex=True, constrained_layout=True)
    minutes = tr.duration_s / 60.0
    unit = 60.0 if minutes <= 240 else 3600.0
    label = "minutes" if unit == 60.0 else "hours"

    # Load: output tokens/s per minute (arrivals), and the per-replica capacity.
    n = max(1, int(np.ceil(tr.duration_s / figures.WINDOW_S)))
    idx = np.minimum((tr.arrival_s // figures.WINDOW_S).astype(np.int64), n - 1)
    load = np.bincount(idx, weights=tr.output_tokens, minlength=n) / figures.WINDOW_S
    t_win = np.arange(n) * figures.WINDOW_S / unit
    ax = axes[0]
    ax.step(t_win, load, where="post", color="black", lw=1)
    ax.set_ylabel("offered output tok/s")
    ax.set_title(
        f"{tr.name}: {tr.requests} requests; one replica sustains "
        f"{setup.capacity_tokens:.0f} tok/s within the SLO; L+W = {setup.params.horizon_s:.0f} s"
    )

    ax = axes[1]
    for name, r in runs.items():
        ax.step(
            r.times / unit,
            r.replicas,
            where="post",
            label=name,
            color=COLOURS.get(name),
            lw=2.2 if name in {"modelscale", "oracle"} else 1.1,
        )
    ax.set_ylabel("replicas (incl. starting)")
    ax.legend(ncol=7, fontsize=8, loc="upper left")

    for ax, which, target, title in (
        (axes[2], 0, setup.slo.ttft_s, "P99 TTFT per minute (s)"),
        (axes[3], 1, setup.slo.tpot_s, "P99 TPOT per minute (s)"),
    ):
        for name, r in runs.items():
            p99 = figures.window_p99s(tr, r)[which]
            ax.step(
                t_win,
                np.minimum(p99, target * 20),
                where="post",
                color=COLOURS.get(name),
                lw=1.6 if name in {"modelscale", "oracle"} else 0.9,
                label=name,
            )
        ax.axhline(target, color="black", ls="--", lw=1, label="SLO")
        ax.set_yscale("log")
        ax.set_ylabel(title)
    axes[3].set_xlabel(label)
    fig.savefig(path, dpi=90)
    plt.close(fig)
