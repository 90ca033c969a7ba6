"""Replay a long aggregate trace at its real rate with one cheap policy, streamed, and
print wall time, CPU time, peak RSS and the replay's figures.

    .venv/bin/python bench/long_trace.py [--trace FILE] [--days D] [--start-days S]
                                         [--rate-scale X] [--dt S]

The policy is a static fleet sized by the fluid capacity model for the trace's peak
10-minute rate (no policy logic to speak of: this measures the simulator). Defaults: the
14-day ServeGen m-large aggregate at its real rate (~196 req/s mean, ~240 M requests)."""

from __future__ import annotations

import argparse
import csv
import gzip
import math
import resource
import sys
import time
from pathlib import Path

import numpy as np

from modelscale.simulate import engine
from modelscale.simulate import trace as trace_mod
from modelscale.simulate.engine import View
from modelscale.simulate.replica import ReplicaParams, Slo, sustainable_request_rate

TRACES = Path(__file__).resolve().parent / "traces"


class Static:
    name = "static"
    interval_s = 60.0
    warmup_gate = True

    def __init__(self, replicas: int) -> None:
        self.replicas = replicas

    def decide(self, view: View) -> int:
        return self.replicas


def peak_and_means(path: Path, start_s: float, duration_s: float) -> tuple[float, float, float]:
    """Peak total_rps and request-weighted token means over the slice, from the aggregate."""
    with gzip.open(path, "rt") as fh:
        rows = list(csv.DictReader(fh))
    t = np.array([float(r["window_start_s"]) for r in rows])
    rps = np.array([float(r["total_rps"]) for r in rows])
    mi = np.array([float(r["mean_input_tokens"] or 0) for r in rows])
    mo = np.array([float(r["mean_output_tokens"] or 0) for r in rows])
    sel = (t >= t[0] + start_s) & (t < t[0] + start_s + duration_s)
    w = rps[sel]
    return (
        float(w.max()),
        float((w * mi[sel]).sum() / w.sum()),
        float((w * mo[sel]).sum() / w.sum()),
    )


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", default=str(TRACES / "servegen_language_m-large_10min.csv.gz"))
    ap.add_argument("--days", type=float, default=14.0)
    ap.add_argument("--start-days", type=float, default=0.0)
    ap.add_argument("--rate-scale", type=float, default=1.0)
    ap.add_argument("--dt", type=float, default=1.0)
    args = ap.parse_args(argv)
    path = Path(args.trace)
    start_s, duration_s = args.start_days * 86400, args.days * 86400
    params, slo = ReplicaParams(), Slo()
    peak, mean_in, mean_out = peak_and_means(path, start_s, duration_s)
    per_replica = sustainable_request_rate(
        params, mean_input=mean_in, mean_output=mean_out, slo=slo
    )
    replicas = min(4096, math.ceil(1.1 * peak * args.rate_scale / per_replica))
    src = trace_mod.stream(path, start_s=start_s, duration_s=duration_s, rate_scale=args.rate_scale)
    n_expected = src.expected_requests if isinstance(src, trace_mod.TraceStream) else 0
    print(
        f"{path.name}: {args.days:g} days from day {args.start_days:g} at x{args.rate_scale:g}, "
        f"~{n_expected / 1e6:.1f} M requests expected; static {replicas} replicas "
        f"({per_replica:.2f} req/s each for {mean_in:.0f} in / {mean_out:.0f} out); "
        f"dt {args.dt:g} s",
        flush=True,
    )
    wall, cpu = time.perf_counter(), time.process_time()
    result = engine.run(
        src,
        Static(replicas),
        params=params,
        initial_replicas=replicas,
        max_replicas=replicas,
        dt=args.dt,
        slo=slo,
    )
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    w = result.windows
    assert w is not None
    scored = ~w.gap
    met = float(w.met[scored].mean()) if scored.any() else 0.0
    print(
        f"replayed {result.requests:,} requests ({result.requests / max(wall, 1e-9):,.0f} req/s of "
        f"wall time) in {wall:.1f} s wall / {cpu:.1f} s CPU; peak RSS {rss_mib:.0f} MiB\n"
        f"windows: {w.requests.size} of {w.window_s:g} s, {int(w.gap.sum())} gaps "
        f"(trace gaps: {len(result.gaps)}), met {met:.2%} "
        f"of scored; rejected {result.rejected}; replica-seconds {result.replica_seconds:,.0f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
