"""Our policy against gated peers on the tuning traces, under the same conditions.

    nice -n 10 .venv/bin/python bench/policy_eval.py [--case NAME ...] [--peers] [--ours]

A local stand-in for the fair policy-vs-policy table (issue 11 item 1) until the suite has
it. Every policy runs behind the same readiness gate (no traffic to a replica before it is
warm), starts from the same replica count -- the trace's first observed load, ceil(output
tokens/s of the busiest minute of the first three / load-tested capacity), never the
oracle's count -- and gets the same tuning budget: one factor on its own target over
`FACTORS`. Ours observes the horizon the operator would measure (no exact start-up
time). Rows:

- `modelscale (defaults)`: what a user who gives only the SLO gets -- the PolicyConfig the
  operator builds from a ModelDeploymentSpec with nothing but the SLO (and maxReplicas, a
  quota rather than a policy knob) set: 500 tok/s per replica, the default headroom;
- `modelscale`, `hpa`, `keda`, `knative-kpa`, `aibrix-apa`: the cheapest setting of the
  grid that keeps >= 99 % of 1-minute windows within the SLO.

HOLD-OUT RULE: only the tuning cases run unless `--held-out` is given, which is for the
one report run after the policy defaults are frozen.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from cases import CASES, Case

from modelscale.api.v1alpha1 import ModelDeploymentSpec
from modelscale.autoscaling import recommender
from modelscale.autoscaling import state as policy_state
from modelscale.autoscaling.types import PolicyConfig
from modelscale.control.scaling import policy_config
from modelscale.simulate import engine, ours, suite
from modelscale.simulate import trace as trace_mod
from modelscale.simulate.engine import Policy

TUNING = ("azure-conv", "azure-conv-x4", "servegen-m-large")
FACTORS = (0.6, 0.7, 0.8, 0.9, 1.0, 1.15, 1.3, 1.5, 1.7, 2.0)
PEERS = ("hpa", "keda", "knative-kpa", "aibrix-apa")
GOAL = 0.99
START_S = 180.0
OUT = Path(__file__).resolve().parent / "results"


def _ablate(name: str) -> None:
    """Take one mechanism out of the learning policy (docs/policy.md's ablation table)."""
    if name == "all":
        return  # handled by default_config (adaptive=False)
    if name == "measured-headroom":
        policy_state.ERRORS = replace(policy_state.ERRORS, min_count=10**9)
    elif name == "extrapolation":
        policy_state.CAPACITY = replace(policy_state.CAPACITY, extrapolate=False)
    elif name == "forgetting":
        policy_state.CAPACITY = replace(policy_state.CAPACITY, forget_every=0)
    elif name == "slo-miss-correction":
        policy_state.MISSES = replace(policy_state.MISSES, cut=1.0)
    elif name == "step-response":
        recommender.STEP_GAIN = 0.0
    elif name == "burst-response":
        CONFIG_CHANGES["burst_cap"] = 1.0


ABLATIONS = (
    "all",
    "measured-headroom",
    "extrapolation",
    "forgetting",
    "slo-miss-correction",
    "step-response",
    "burst-response",
)
ADAPTIVE = True
# PolicyConfig fields an ablation sets (default_config applies them).
CONFIG_CHANGES: dict[str, Any] = {}


def default_config(setup: suite.Setup) -> PolicyConfig:
    """The operator's PolicyConfig for a spec that gives only the SLO."""
    spec = ModelDeploymentSpec.model_validate(
        {
            "model": {"name": "llm", "repository": "/models"},
            "maxReplicas": suite.MAX_REPLICAS,
            "scaling": {
                "targets": {
                    "latencySLO": {"p99Seconds": setup.slo.ttft_s},
                    "timePerOutputTokenP99Seconds": setup.slo.tpot_s,
                }
            },
        }
    )
    return replace(policy_config(spec), adaptive=ADAPTIVE, **CONFIG_CHANGES)


def first_load_replicas(setup: suite.Setup) -> int:
    """Sized for the first observed load, as the service's operator would have left it:
    the busiest minute of the first `START_S` seconds over the load-tested capacity."""
    tr = setup.trace
    rate = 0.0
    for t in range(0, int(START_S) - 59, 10):
        sel = (tr.arrival_s >= t) & (tr.arrival_s < t + 60.0)
        rate = max(rate, float(tr.output_tokens[sel].sum()) / 60.0)
    return max(1, math.ceil(rate / setup.capacity_tokens))


def gated(policy: Policy) -> Policy:
    policy.warmup_gate = True  # type: ignore[misc]  # an instance flag over the class one
    return policy


def run(setup: suite.Setup, policy: Policy, initial: int) -> dict[str, Any]:
    result = engine.run(
        setup.trace,
        policy,
        params=setup.params,
        initial_replicas=initial,
        max_replicas=suite.MAX_REPLICAS,
        dt=setup.dt,
    )
    f = suite.evaluate(setup, result)
    return {
        "windows": f.slo_attainment_windows,
        "requests": f.slo_attainment_requests,
        "replica_seconds": f.replica_seconds,
        "ratio": f.excess_over_oracle + 1.0,
        "events": f.scale_events,
        "cold": f.cold_requests,
    }


def ours_policy(setup: suite.Setup, config: PolicyConfig) -> Policy:
    return ours.Modelscale(config=config, params=setup.params)


def best(points: list[dict[str, Any]]) -> dict[str, Any] | None:
    ok = [p for p in points if p["windows"] >= GOAL]
    return min(ok, key=lambda p: p["replica_seconds"]) if ok else None


def evaluate_case(
    case: Case, *, peers: bool, skip_peers: bool, sweep_ours: bool, cache: dict[str, Any]
) -> None:
    began = time.perf_counter()
    tr = trace_mod.load(
        case.path, start_s=case.start_s, duration_s=case.duration_s, rate_scale=case.rate_scale
    )
    setup = suite.prepare(tr, dt=case.dt)
    initial = first_load_replicas(setup)
    oracle_rs = setup.oracle.result.replica_seconds
    rows: dict[str, dict[str, Any]] = {}
    base = default_config(setup)
    rows["modelscale (defaults)"] = {
        "setting": "defaults",
        **run(setup, ours_policy(setup, base), initial),
    }
    if sweep_ours:
        pts = []
        for f in FACTORS:
            cfg = replace(base, target_tokens_per_replica=setup.capacity_tokens * f)
            pts.append(
                {
                    "setting": f"target {f:g}x capacity",
                    **run(setup, ours_policy(setup, cfg), initial),
                }
            )
        rows["modelscale"] = best(pts) or {
            "setting": "never",
            **max(pts, key=lambda p: p["windows"]),
        }
    cached = cache.get(case.name, {})
    for name in () if skip_peers else PEERS:
        if peers or name not in cached:
            pts = []
            for f in FACTORS:
                policy = gated(suite.make_policy(name, setup, scale=f))
                pts.append({"setting": f"target x{f:g}", **run(setup, policy, initial)})
            b = best(pts)
            cached[name] = b or {"setting": "never", **max(pts, key=lambda p: p["windows"])}
        rows[name] = cached[name]
    cache[case.name] = cached
    print(
        f"### {case.name}: start {initial} replicas, oracle {oracle_rs:,.0f} replica-s, "
        f"capacity {setup.capacity_tokens:.0f} tok/s ({time.perf_counter() - began:.0f} s)\n"
    )
    print("| policy | setting | windows in SLO | replica-seconds | vs oracle | events |")
    print("|---|---|---:|---:|---:|---:|")
    for name, r in rows.items():
        print(
            f"| {name} | {r['setting']} | {r['windows']:.2%} | {r['replica_seconds']:,.0f} "
            f"| {r['ratio']:.3f}x | {r['events']} |"
        )
    print(flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--case", action="append", choices=[c.name for c in CASES])
    parser.add_argument("--peers", action="store_true", help="re-run the peers' sweeps")
    parser.add_argument("--ours", action="store_true", help="also sweep our target factor")
    parser.add_argument("--no-peers", action="store_true", help="only our policy")
    parser.add_argument("--ablate", choices=ABLATIONS, help="take one mechanism out of ours")
    parser.add_argument("--held-out", action="store_true", help="allow non-tuning cases")
    args = parser.parse_args()
    names = args.case or list(TUNING)
    held = [n for n in names if n not in TUNING]
    if held and not args.held_out:
        print(f"refusing held-out cases {held}: pass --held-out only after the freeze commit")
        return 2
    if args.ablate:
        global ADAPTIVE  # noqa: PLW0603 (a one-shot switch for this run)
        ADAPTIVE = args.ablate != "all"
        _ablate(args.ablate)
    path = OUT / "policy_eval-peers.json"
    cache: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    for case in CASES:
        if case.name in names:
            evaluate_case(
                case,
                peers=args.peers,
                skip_peers=args.no_peers,
                sweep_ours=args.ours,
                cache=cache,
            )
    OUT.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(cache, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
