"""`make bench-live`: modelscale against the real KEDA and HPA on the local cluster.

The same time-compressed segments of the Azure 2023 conversation trace (a quiet start, a
ramp, a burst, a quiet end) are replayed through the ready endpoints against the same toy
Triton model, once per policy:

  predictive   modelscale Predictive at its defaults (only the latency SLO given)
  keda-gated   KEDA's Prometheus trigger on output token rate, threshold = the load-tested
               capacity of one replica; ModelDeployment in External mode (warm-up gate)
  keda-plain   the same ScaledObject on a plain Deployment of the same Triton pod, no gate
               (readiness probe only): a KEDA user without modelscale
  hpa          an HPA on the same external metric (served by KEDA's metrics server),
               ModelDeployment in External mode
  static-max   the ModelDeployment at maxReplicas throughout

Each run is scored client-side (e2e/harness/live_score.py) and the simulator is run on the
same requests; results go to bench/results/live-results.json, live-table.md and
live-timeline.png. Wall time is printed at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import fcntl
import functools
import gzip
import json
import math
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from typing import Any

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "e2e"), str(REPO / "e2e" / "tests")]

import conftest as e2e_conftest  # noqa: E402
import matplotlib  # noqa: E402
from kubernetes import config as kube_config  # noqa: E402
from test_autoscaling_e2e import Phase, phased_trace  # noqa: E402
from toy_md import modeldeployment_body, toy_model, toy_server  # noqa: E402

from harness import cluster as harness_cluster  # noqa: E402
from harness import live, live_score, loadgen, toy_load, userview  # noqa: E402
from harness.cluster import keda  # noqa: E402
from harness.kubectl import Kubectl  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

RESULTS = REPO / "bench" / "results"
NAME = "toy"
SLO_P99_S = toy_load.SLO_P99_S
COLD_PER_POD = int(toy_load.TOY_ENV["TOY_LLM_COLD_REQUESTS"])
MIN_REPLICAS, MAX_REPLICAS = toy_load.MIN_REPLICAS, toy_load.MAX_REPLICAS
POLICIES = ("predictive", "keda-gated", "keda-plain", "hpa", "static-max")
LOAD_TEST_RATES = (5.0, 7.0, 9.0, 11.0, 13.0)  # requests/s of toy_load.MAX_OUTPUT_TOKENS tokens

# Trace offsets (s) of bench/traces/azure2023_conv_normalized.csv.gz (the same file as
# e2e/traces/) and how many times faster each is replayed (also its rate multiplier).
SEGMENTS: tuple[tuple[str, tuple[Phase, ...]], ...] = (
    ("quiet start", (Phase("quiet start", trace_start_s=2880, wall_s=20, speedup=1.0),)),
    (
        "ramp",
        (
            Phase("ramp x1.5", trace_start_s=1200, wall_s=25, speedup=1.5),
            Phase("ramp x2.25", trace_start_s=1245, wall_s=25, speedup=2.25),
            Phase("ramp x3", trace_start_s=1312, wall_s=25, speedup=3.0),
        ),
    ),
    ("burst", (Phase("burst x4", trace_start_s=1650, wall_s=30, speedup=4.0),)),
    ("quiet end", (Phase("quiet end", trace_start_s=2900, wall_s=45, speedup=1.0),)),
)


def load() -> live.Load:
    """The replayed requests, the named segments (replay offsets), the load step (the
    ramp's start) and the toy's replay settings."""
    phases = [ph for _, group in SEGMENTS for ph in group]
    requests, starts = phased_trace(phases)
    segments, i = [], 0
    for name, group in SEGMENTS:
        start = starts[i]
        i += len(group)
        segments.append(live_score.Segment(name, start, start + sum(p.wall_s for p in group)))
    scoring = live_score.Scoring(segments, segments[1].start_s, SLO_P99_S, COLD_PER_POD)
    return live.Load(requests=requests, scoring=scoring, replay=toy_load.REPLAY)


def md(namespace: str, scaling: dict[str, Any], *, replicas: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "model": toy_model("vllm"),
        "server": toy_server(toy_load.TOY_ENV),
        "minReplicas": MIN_REPLICAS,
        "maxReplicas": MAX_REPLICAS,
        "scaling": scaling,
    }
    if replicas is not None:
        spec["replicas"] = replicas
    return modeldeployment_body(NAME, namespace, spec)


EXTERNAL = {"mode": "External"}
KEDA_LOCK = "/run/lock/modelscale-keda.lock"  # the one test_keda's fixture takes


def plan(policy: str, *, namespace: str, scaling: live.Autoscaling) -> live.Plan:
    """What to deploy for `policy`; `scaling`: the KEDA and HPA policies' threshold."""
    md_setup = live.md_setup(NAME)
    external = md(namespace, EXTERNAL, replicas=1)
    if policy == "predictive":
        slo = {"latencySLO": {"signal": "EndToEnd", "p99Seconds": SLO_P99_S}}
        return live.Plan(md_setup, [md(namespace, {"mode": "Predictive", "targets": slo})])
    keda_so = functools.partial(live.scaled_object, namespace=namespace, scaling=scaling)
    if policy == "keda-gated":
        return live.Plan(md_setup, [external], [keda_so(NAME, target=live.md_target(NAME))])
    if policy == "keda-plain":
        plain = f"{NAME}-plain"
        objects = live.plain_objects(external, name=plain, key=live.new_key())
        return live.Plan(live.plain_setup(plain), objects, [keda_so(plain, target={"name": plain})])
    if policy == "hpa":
        # A ScaledObject on an idle pod has KEDA's metrics server serve the metric; the HPA
        # on the ModelDeployment reads it through the aggregated API.
        source = "metric-source"
        so = keda_so(source, target={"name": source})
        so["spec"]["maxReplicaCount"] = 1
        hpa = live.hpa_on_keda_metric(
            NAME, namespace=namespace, target=live.md_target(NAME), source=source, scaling=scaling
        )
        sleeper = live.sleeper_deployment(source, namespace=namespace)
        return live.Plan(md_setup, [external, sleeper], [so, hpa])
    if policy == "static-max":
        objects = [md(namespace, EXTERNAL, replicas=MAX_REPLICAS)]
        return live.Plan(live.md_setup(NAME, initial_ready=MAX_REPLICAS), objects)
    raise SystemExit(f"bench/live.py: unknown policy {policy!r}; pick from {', '.join(POLICIES)}")


@contextlib.contextmanager
def on_cluster(*, with_keda: bool) -> Iterator[tuple[harness_cluster.ClusterInfo, live.Cluster]]:
    """The local cluster (reused or brought up), KEDA, and the operator's Helm release, as
    the e2e suite installs them (the same lock, so no test installs over it)."""
    with harness_cluster.session() as info:
        kubectl = Kubectl(info.bin_dir, info.kubeconfig)
        new_client: Any = kube_config.new_client_from_config  # untyped in kubernetes
        api = new_client(config_file=str(info.kubeconfig))
        with (
            open(KEDA_LOCK, "w") as keda_lock,
            open(e2e_conftest.OPERATOR_LOCK, "w") as lock,
        ):
            fcntl.flock(keda_lock, fcntl.LOCK_EX)
            fcntl.flock(lock, fcntl.LOCK_EX)
            if with_keda:
                keda.up()
            with contextlib.contextmanager(e2e_conftest._installed)(info, kubectl):
                try:
                    yield info, live.Cluster(kubectl, api)
                finally:
                    if with_keda:
                        keda.down()
                    api.close()


def measure_capacity(cluster: live.Cluster, *, duration_s: float) -> dict[str, Any]:
    kubectl, api = cluster
    ns = live.new_namespace(kubectl, api, f"live-capacity-{int(time.time())}")
    try:
        setup = live.md_setup(NAME)
        live.apply_all(kubectl, [md(ns, EXTERNAL, replicas=1)])
        live.wait_ready(api, ns, setup, timeout=300)
        with live.ready_endpoints(api, ns, setup.service) as endpoints:
            capacity, reports = live.replica_capacity(
                endpoints,
                rates_per_s=LOAD_TEST_RATES,
                max_tokens=toy_load.MAX_OUTPUT_TOKENS,
                slo_p99_s=SLO_P99_S,
                duration_s=duration_s,
            )
    finally:
        live.delete_namespace(kubectl, api, ns)
    if capacity <= 0:
        raise SystemExit(
            f"bench/live.py: one replica met the {SLO_P99_S} s P99 at none of "
            f"{LOAD_TEST_RATES} req/s (the machine is overloaded?); pass --capacity"
        )
    return {"tokens_per_s": capacity, "load_test": [dataclasses.asdict(r) for r in reports]}


def run_policy(
    policy: str, *, cluster: live.Cluster, scaling: live.Autoscaling, load: live.Load
) -> live.Run:
    ns = live.new_namespace(cluster.kubectl, cluster.api, f"live-{policy}-{int(time.time())}")
    try:
        the_plan = plan(policy, namespace=ns, scaling=scaling)
        return live.run(policy, cluster=cluster, namespace=ns, plan=the_plan, load=load)
    finally:
        live.delete_namespace(cluster.kubectl, cluster.api, ns)


# --- the simulator on the same requests ----------------------------------------------------


def startup_seconds(runs: Sequence[live.Run]) -> tuple[float, float]:
    """Start-up L (created -> containers ready, from the ungated pods) and warm-up W
    (gate opened - L, from the gated pods) of the pods the runs added."""
    plain = [
        p.ready_at - p.created
        for r in runs
        if r.report.policy == "keda-plain"
        for p in r.pods
        if p.ready_at is not None and p.created > r.result.started_at
    ]
    gated = [
        p.warm_from - p.created
        for r in runs
        if r.report.policy != "keda-plain"
        for p in r.pods
        if p.warm_from is not None and p.created > r.result.started_at
    ]
    startup = statistics.median(plain) if plain else 10.0
    warm = statistics.median(gated) - startup if gated else 5.0
    return startup, max(0.0, warm)


def simulate(requests: Sequence[loadgen.TraceRequest], *, startup: float, warmup: float) -> Any:
    """`modelscale simulate` on the replayed requests (output tokens capped as replayed)."""
    cap = toy_load.MAX_OUTPUT_TOKENS
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "live-segments.csv.gz"
        with gzip.open(path, "wt", newline="") as f:
            w = csv.writer(f)
            w.writerow(["t_s", "input_tokens", "output_tokens"])
            for r in requests:
                w.writerow([f"{r.t_s:.6f}", r.input_tokens, max(1, min(r.output_tokens, cap))])
        cmd = [
            sys.executable, "-m", "modelscale", "simulate", "--trace", str(path), "--json",
            "--startup", f"{startup:.1f}", "--warmup", f"{warmup:.1f}",
            *(a for p in ("modelscale", "keda", "hpa", "static-peak") for a in ("--policy", p)),
        ]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip() or proc.stdout.strip(), "command": cmd[1:]}
    out = json.loads(proc.stdout)
    return {"startup_s": startup, "warmup_s": warmup, **out}


# --- report --------------------------------------------------------------------------------


def fmt_s(x: float | None) -> str:
    return "never" if x is None else f"{x:.0f} s"


def table(runs: Sequence[live.Run], sim: Any) -> str:
    """The live figures per policy, with the simulator's for the same requests beside them;
    cost is relative to static-max in each world (their replicas are not the same size)."""
    # The simulator's table with every peer behind the gate ("policies_gated") for the gated
    # live runs, its peers as deployed ("policies": KEDA without a gate) for keda-plain.
    sim_of = {
        live_policy: tuple(where.split("."))
        for live_policy, where in (
            ("predictive", "policies.modelscale"),
            ("keda-gated", "policies_gated.keda"),
            ("keda-plain", "policies.keda"),
            ("hpa", "policies_gated.hpa"),
            ("static-max", "policies.static-peak"),
        )
    }
    sims = sim if isinstance(sim, dict) else {}
    live_static = next(
        (r.report.replica_seconds for r in runs if r.report.policy == "static-max"), None
    )
    sim_static = ((sims.get("policies") or {}).get("static-peak") or {}).get("replica_seconds")

    def ratio(x: float | None, base: float | None) -> str:
        return "-" if x is None or not base else f"{x / base:.2f}x"

    rows = [
        "| policy | SLO windows met (10 s) | requests within SLO | failed / no endpoint | "
        "replica-s | vs static | cold requests | scale events | step → first added replica "
        "(decided / Ready) | sim: windows met (60 s) | sim: vs static | sim: cold |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        rep = r.report
        table_name, sim_policy = sim_of[rep.policy]
        peer = (sims.get(table_name) or {}).get(sim_policy) or {}
        sim_w = peer.get("slo_attainment_windows")
        rows.append(
            f"| {rep.policy} | {rep.windows_met}/{rep.windows} "
            f"({100 * rep.slo_attainment_windows:.0f} %) | "
            f"{100 * rep.slo_attainment_requests:.1f} % | {rep.failed} / {rep.no_endpoint} | "
            f"{rep.replica_seconds:.0f} | {ratio(rep.replica_seconds, live_static)} | "
            f"{rep.cold_requests} | {rep.scale_events} | "
            f"{fmt_s(rep.first_scale_up_s)} / {fmt_s(rep.first_added_ready_s)} | "
            f"{'-' if sim_w is None else f'{100 * sim_w:.0f} %'} | "
            f"{ratio(peer.get('replica_seconds'), sim_static)} | {peer.get('cold_requests', '-')} |"
        )
    return "\n".join(rows)


def plot(runs: Sequence[live.Run], path: pathlib.Path) -> None:
    fig, (ax_load, ax_rep, ax_p99) = plt.subplots(3, 1, figsize=(9, 8), sharex=True)
    for r in runs:
        started = r.result.started_at
        ws = userview.windows(r.result.records, started)
        xs = [w.start - started + userview.WINDOW_S / 2 for w in ws]
        if r is runs[0]:
            ax_load.plot(xs, [w.offered_tokens_per_s for w in ws], color="black", label="offered")
        ax_rep.step(
            [t - started for t, _ in r.replicas], [n for _, n in r.replicas], where="post",
            label=r.report.policy,
        )  # fmt: skip
        ax_p99.plot(xs, [min(w.p99_s, 30.0) for w in ws], marker=".", label=r.report.policy)
    ax_load.set_ylabel("output tokens/s asked")
    ax_rep.set_ylabel("spec.replicas")
    ax_p99.set_ylabel("client P99 per 10 s (s, cap 30)")
    ax_p99.axhline(SLO_P99_S, color="grey", linestyle="--", label="SLO")
    ax_p99.set_yscale("log")
    ax_p99.set_xlabel("s since the replay started")
    ax_rep.legend(fontsize=8)
    ax_p99.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/live.py", description=__doc__.split("\n")[0])
    parser.add_argument("--policy", action="append", choices=POLICIES, help="default: all")
    parser.add_argument(
        "--capacity", type=float, help="tokens/s per replica (default: load-test it)"
    )
    parser.add_argument("--load-test-seconds", type=float, default=20.0)
    parser.add_argument("--out", type=pathlib.Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.capacity is not None and args.capacity <= 0:
        parser.error(f"--capacity must be > 0 tokens/s, got {args.capacity:g}")
    if args.load_test_seconds <= 0:
        parser.error(f"--load-test-seconds must be > 0, got {args.load_test_seconds:g}")
    began = time.monotonic()
    policies = args.policy or list(POLICIES)
    the_load = load()
    with_keda = any(p in ("keda-gated", "keda-plain", "hpa") for p in policies)
    with on_cluster(with_keda=with_keda) as (info, cluster):
        if args.capacity is not None:
            capacity: dict[str, Any] = {"tokens_per_s": args.capacity, "load_test": "given"}
        else:
            capacity = measure_capacity(cluster, duration_s=args.load_test_seconds)
        print(f"per-replica capacity: {capacity['tokens_per_s']:g} tokens/s")
        scaling = live.Autoscaling(
            float(capacity["tokens_per_s"]), MIN_REPLICAS, MAX_REPLICAS, info.prometheus_url
        )
        runs = []
        for policy in policies:
            t0 = time.monotonic()
            r = run_policy(policy, cluster=cluster, scaling=scaling, load=the_load)
            runs.append(r)
            print(f"{policy}: {json.dumps(r.report.to_dict())} ({time.monotonic() - t0:.0f} s)")
    startup, warmup = startup_seconds(runs)
    sim = simulate(the_load.requests, startup=startup, warmup=warmup)
    wall = time.monotonic() - began
    args.out.mkdir(parents=True, exist_ok=True)
    result = {
        "segments": [
            {"name": name, "phases": [dataclasses.asdict(p) for p in group]}
            for name, group in SEGMENTS
        ],
        "segment_offsets": [dataclasses.asdict(s) for s in the_load.scoring.segments],
        "load_step_s": the_load.scoring.load_step_s,
        "slo_p99_s": SLO_P99_S,
        "capacity": capacity,
        "policies": {r.report.policy: r.report.to_dict() for r in runs},
        "replicas": {
            r.report.policy: [[t - r.result.started_at, n] for t, n in r.replicas] for r in runs
        },
        "simulator": sim,
        "wall_s": wall,
    }
    (args.out / "live-results.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    md_table = table(runs, sim)
    (args.out / "live-table.md").write_text(md_table + "\n")
    plot(runs, args.out / "live-timeline.png")
    print(md_table)
    print(f"make bench-live: wall time {wall:.0f} s ({math.ceil(wall / 60)} min)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
