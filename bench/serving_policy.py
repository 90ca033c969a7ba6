"""`make bench-serving`: what the serving policy buys at max replicas on a trace burst.

    .venv/bin/python bench/serving_policy.py [--replicas N] [--rate-scale X] [--json OUT]

The replicas are held at `--replicas` (max replicas: no autoscaler can add more) while a
slice of the Azure 2023 conversation trace is replayed `--rate-scale` times faster than
recorded, a share `--interactive-share` (default half) of the requests interactive, the
rest batch. The same requests run twice: without
a serving policy (one first-come first-served queue per pod, no limit) and with one
(interactive first; batch may queue `--batch-queue` requests per pod and wait
`--timeout` seconds, interactive `--timeout` seconds; over either a request is refused at
once). Printed per class: requests, SLO attainment (TTFT and TPOT targets both met;
refused requests miss), P99 TTFT and shed requests; the offered load is given as a
multiple of what the replicas sustain within the SLO (the simulator's load test).
Runs in well under a minute.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from modelscale.simulate import engine, loadtest, serving
from modelscale.simulate import trace as trace_mod
from modelscale.simulate.baselines import StaticPeak
from modelscale.simulate.replica import ReplicaParams, Slo

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "bench" / "traces" / "azure2023_conv_normalized.csv.gz"
SLO = Slo(ttft_s=2.0, tpot_s=0.1, ttft_per_1k_input_s=0.5)  # `modelscale simulate`'s default


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="bench/serving_policy.py", description=__doc__)
    p.add_argument("--replicas", type=int, default=2)
    p.add_argument("--rate-scale", type=float, default=1.5)
    p.add_argument("--start", type=float, default=0.0)
    p.add_argument("--duration", type=float, default=600.0)
    p.add_argument("--interactive-share", type=float, default=0.5)
    p.add_argument("--batch-queue", type=int, default=4)
    p.add_argument("--timeout", type=float, default=5.0)
    p.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = p.parse_args(argv)
    began = time.perf_counter()
    tr = trace_mod.load(
        TRACE, start_s=args.start, duration_s=args.duration, rate_scale=args.rate_scale
    )
    params = ReplicaParams(startup_sigma=0.0)
    capacity = loadtest.measure(tr, params=params, slo=SLO).request_rate * args.replicas
    offered = tr.requests / tr.duration_s
    share = args.interactive_share
    split = f"interactive={share:g},batch={1 - share:g}"
    runs = {
        "without": serving.from_flags(split=split, max_queue=None, timeout=None, ordered=False),
        "with": serving.from_flags(
            split=split,
            max_queue=f"batch={args.batch_queue}",
            timeout=f"interactive={args.timeout:g},batch={args.timeout:g}",
        ),
    }
    print(
        f"trace {tr.name} [{args.start:g}, {args.start + args.duration:g}) s x{args.rate_scale:g}: "
        f"{offered:.1f} req/s offered to {args.replicas} replicas held at max, which sustain "
        f"{capacity:.1f} req/s within the SLO ({offered / capacity:.1f}x); "
        f"SLO P99 TTFT {SLO.ttft_s:g} s + {SLO.ttft_per_1k_input_s:g} s/1k prompt, "
        f"TPOT {SLO.tpot_s:g} s"
    )
    head = (
        f"{'policy':<8} {'class':<12} {'requests':>8} {'req SLO':>8} {'P99 TTFT':>9} "
        f"{'shed':>6} {'shed %':>7} {'max wait to shed':>17}"
    )
    print(head)
    print("-" * len(head))
    doc: dict[str, object] = {
        "trace": tr.name,
        "rate_scale": args.rate_scale,
        "interactive_share": share,
        "replicas": args.replicas,
        "offered_requests_per_s": round(offered, 3),
        "sustained_requests_per_s": round(capacity, 3),
        "runs": {},
    }
    for name, policy in runs.items():
        result = engine.run(
            tr,
            StaticPeak(replicas=args.replicas),
            params=ReplicaParams(startup_sigma=0.0, serving=policy),
            initial_replicas=args.replicas,
            slo=SLO,
            drain_s=120.0,
        )
        doc["runs"][name] = {c.name: c.to_dict() for c in result.classes}  # type: ignore[index]
        for c in result.classes:
            p99 = f"{c.p99_ttft_s:>8.2f}s" if c.p99_ttft_s != float("inf") else f"{'inf':>9}"
            wait = f"{c.max_wait_to_shed_s:>16.1f}s" if c.shed else f"{'-':>17}"
            print(
                f"{name:<8} {c.name:<12} {c.requests:>8d} {c.attainment or 0:>8.2%} {p99} "
                f"{c.shed:>6d} {c.shed / max(1, c.requests):>7.2%} {wait}"
            )
    print(f"({time.perf_counter() - began:.1f} s)")
    if args.json:
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
