"""Predictive autoscaling end to end on the local cluster: real Triton pods running the toy
LLM, the operator installed by helm reading the cluster's real Prometheus, and load replayed
from the Azure 2023 conversation trace through the Service's ready endpoints.

What a user would notice, and what these tests assert:
- a load ramp makes the operator add replicas BEFORE the P99 end-to-end latency the users
  see crosses the SLO, new pods get no user request before their warm-up finished, and the
  replicas fall back to minReplicas once the load is gone;
- with Prometheus gone mid-run the operator does not scale down blind: it says why (a
  condition and a Warning event) and resumes when Prometheus is back.

The latency the tests judge is measured client-side by the load generator, per 10 s window
of scheduled arrival: answer time plus any client-side wait for a concurrency slot (what a
user behind a gateway waits); failed requests count as infinitely slow. The operator's own
view (status.autoscaling.currentP99Seconds, from the vLLM e2e histogram over a 1 m rate
window) is recorded and printed next to it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import pathlib
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest
from kubernetes import client
from toy_md import modeldeployment_body, toy_model, toy_server

from harness import cluster as harness_cluster
from harness import loadgen, toy_load, userview
from harness.kubectl import Kubectl, wait_until
from harness.toy_load import MAX_REPLICAS, MIN_REPLICAS, SLO_P99_S, TOY_ENV
from modelscale import podfacts
from modelscale.api.v1alpha1 import from_rfc3339

pytestmark = pytest.mark.cluster

TRACE = pathlib.Path(__file__).resolve().parents[1] / "traces" / "azure2023_conv_normalized.csv.gz"
GROUP, VERSION, PLURAL = "modelscale.dev", "v1alpha1", "modeldeployments"

SLO_SIGNAL = "EndToEnd"
TOKENS_PER_REPLICA = 400.0  # half the knee: scale before latency breaks
SCALE_DOWN_WINDOW_S = 30.0
HORIZON_S = 20.0  # pods here are warmed 10-16 s after creation

SCALE_REASONS = (
    "ForecastTokenRate",
    "LatencySLO",
    "QueueBuildup",
    "MaxReplicas",
    "ScaleUpStabilizing",
    "ScaleDownStabilizing",
    "MinReplicas",
)


def autoscaled(name: str, namespace: str) -> dict[str, Any]:
    return modeldeployment_body(
        name,
        namespace,
        {
            "model": toy_model("vllm"),
            "server": toy_server(TOY_ENV),
            "minReplicas": MIN_REPLICAS,
            "maxReplicas": MAX_REPLICAS,
            "scaling": {
                "mode": "Predictive",
                "targets": {
                    "tokensPerSecondPerReplica": TOKENS_PER_REPLICA,
                    "latencySLO": {"signal": SLO_SIGNAL, "p99Seconds": SLO_P99_S},
                    "headroom": 0.8,
                },
                "forecast": {"horizonSeconds": HORIZON_S},
                "scaleDown": {"stabilizationWindowSeconds": SCALE_DOWN_WINDOW_S},
            },
            "warmUp": {
                "count": 4,
                "concurrency": 2,
                "success": {"stableLastN": 2, "maxLatencyFactor": 3},
            },
        },
    )


# --- load ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Phase:
    """`wall_s` seconds of the trace from `trace_start_s`, replayed `speedup` times faster."""

    name: str
    trace_start_s: float
    wall_s: float
    speedup: float


def phased_trace(phases: Sequence[Phase]) -> tuple[list[loadgen.TraceRequest], list[float]]:
    """The phases' requests back to back, and each phase's start offset."""
    out: list[loadgen.TraceRequest] = []
    starts: list[float] = []
    offset = 0.0
    for ph in phases:
        starts.append(offset)
        part = loadgen.read_trace(
            TRACE, start_s=ph.trace_start_s, duration_s=ph.wall_s * ph.speedup, speedup=ph.speedup
        )
        out.extend(dataclasses.replace(r, t_s=r.t_s + offset) for r in part)
        offset += ph.wall_s
    return out, starts


# --- what the operator did, sampled in the background --------------------------------------


@dataclasses.dataclass(frozen=True)
class Sample:
    t: float
    spec_replicas: int | None
    desired: int | None
    autoscaling: dict[str, Any]
    conditions: list[dict[str, Any]]


class Monitor:
    """Every `interval_s`: the Deployment's spec.replicas, the ModelDeployment's status and
    every pod seen (kept after deletion, so a removed pod's warm-up time stays known)."""

    def __init__(self, api: Any, namespace: str, name: str, *, interval_s: float = 1.0) -> None:
        self.api, self.ns, self.name, self.interval_s = api, namespace, name, interval_s
        self.samples: list[Sample] = []
        self.pods: dict[str, dict[str, Any]] = {}  # uid -> newest body seen
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="monitor", daemon=True)

    def _once(self) -> None:
        apps = client.AppsV1Api(self.api)
        custom = client.CustomObjectsApi(self.api)
        core = client.CoreV1Api(self.api)
        try:
            dep = apps.read_namespaced_deployment(self.name, self.ns)
            spec_replicas = dep.spec.replicas
        except client.ApiException:
            spec_replicas = None
        md: dict[str, Any] = dict(
            custom.get_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, self.name)  # type: ignore[call-overload]
        )
        status = md.get("status") or {}
        self.samples.append(
            Sample(
                t=time.time(),
                spec_replicas=spec_replicas,
                desired=status.get("desiredReplicas"),
                autoscaling=status.get("autoscaling") or {},
                conditions=status.get("conditions") or [],
            )
        )
        pods = core.list_namespaced_pod(
            self.ns, label_selector=f"{podfacts.MD_LABEL}={self.name}"
        ).items
        for pod in pods:
            body = self.api.sanitize_for_serialization(pod)
            self.pods[body["metadata"]["uid"]] = body

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._once()
            except Exception as err:  # keep sampling through apiserver hiccups
                print(f"monitor: {err!r}")
            self._stop.wait(self.interval_s)

    def __enter__(self) -> Monitor:
        self._once()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def first(self, pred: Any, *, after: float = 0.0) -> Sample | None:
        return next((s for s in list(self.samples) if s.t >= after and pred(s)), None)

    def decisions(self) -> list[dict[str, Any]]:
        seen: dict[tuple[str, int, str], dict[str, Any]] = {}
        for s in list(self.samples):
            for d in s.autoscaling.get("decisions") or []:
                seen[(d["time"], d["replicas"], d["reason"])] = d
        return sorted(seen.values(), key=lambda d: from_rfc3339(d["time"]))


@contextlib.contextmanager
def watched(
    kube_api: Any, namespace: str, name: str
) -> Iterator[tuple[Monitor, loadgen.EndpointPoller]]:
    """The ModelDeployment's Monitor, and a poller of its Service's ready endpoints (what
    the load generator sends to), both running for the block."""
    with (
        Monitor(kube_api, namespace, name) as mon,
        loadgen.EndpointPoller(
            lambda: loadgen.ready_endpoints_from_slices(kube_api, namespace, name),
            interval_s=0.3,
        ) as endpoints,
    ):
        yield mon, endpoints


def events(kubectl: Kubectl, ns: str, name: str, reason: str) -> list[dict[str, Any]]:
    items = kubectl.json("-n", ns, "get", "events")["items"]
    return [
        e
        for e in items
        if e.get("reason") == reason
        and e["involvedObject"]["kind"] == "ModelDeployment"
        and e["involvedObject"]["name"] == name
    ]


def event_time(event: dict[str, Any]) -> float:
    stamp = event.get("eventTime") or event.get("lastTimestamp") or event.get("firstTimestamp")
    return from_rfc3339(str(stamp))


def condition(sample: Sample, type_: str) -> dict[str, Any] | None:
    return next((c for c in sample.conditions if c.get("type") == type_), None)


def warmed_pods(kubectl: Kubectl, ns: str, name: str) -> list[dict[str, Any]]:
    items = kubectl.json("-n", ns, "get", "pods", "-l", f"{podfacts.MD_LABEL}={name}")["items"]
    return [
        p for p in items if not p["metadata"].get("deletionTimestamp") and podfacts.read(p).warmed
    ]


def deployment_replicas(kubectl: Kubectl, ns: str, name: str) -> int:
    return int(kubectl.json("-n", ns, "get", "deployment", name)["spec"]["replicas"])


@pytest.fixture
def served(operator: str, kubectl: Kubectl, namespace: str) -> Iterator[str]:
    """The autoscaled ModelDeployment with its first pod warmed."""
    name = "toy"
    kubectl.apply(autoscaled(name, namespace))
    wait_until(
        lambda: len(warmed_pods(kubectl, namespace, name)) == 1,
        timeout=300,
        what="the first pod warmed",
    )
    yield name


def show(s: Sample | None) -> str:
    if s is None:
        return "-"
    a = {k: v for k, v in s.autoscaling.items() if k not in ("state", "learnedState")}
    return json.dumps({"desiredReplicas": s.desired, "autoscaling": a}, indent=2)


# --- tests ---------------------------------------------------------------------------------


RAMP = (
    Phase("low", trace_start_s=0, wall_s=40, speedup=0.8),  # ~150-220 tok/s: 1 replica
    Phase("ramp x1.5", trace_start_s=1200, wall_s=30, speedup=1.5),  # ~550 tok/s: 2
    Phase("ramp x2", trace_start_s=1245, wall_s=30, speedup=2.0),  # ~700: one pod's limit
    Phase("ramp x2.5", trace_start_s=1305, wall_s=30, speedup=2.5),  # ~900: past one knee
    Phase("peak x3", trace_start_s=1380, wall_s=35, speedup=3.0),  # ~1300: 3 replicas
)


def test_load_ramp_scales_up_before_p99_breaks_and_back_down_after(
    kubectl: Kubectl, kube_api: Any, namespace: str, served: str
) -> None:
    name = served
    requests, starts = phased_trace(RAMP)
    with watched(kube_api, namespace, name) as (mon, endpoints):
        started = time.time()
        replay = loadgen.start_replay(requests, endpoints=endpoints, **toy_load.REPLAY)
        try:
            result = replay.wait(sum(p.wall_s for p in RAMP) + 120)
        finally:
            replay.stop()
        load_end = time.time()
        ramp_start = started + starts[1]

        # The load is gone: back to minReplicas after the stabilisation window.
        wait_until(
            lambda: deployment_replicas(kubectl, namespace, name) == MIN_REPLICAS,
            timeout=300,
            what=f"replicas back to minReplicas {MIN_REPLICAS} after the load stopped",
        )
        down_at = time.time()
        wait_until(
            lambda: mon.samples[-1].desired == MIN_REPLICAS,
            timeout=30,
            what="status.desiredReplicas back to min",
        )

    records = result.records
    windows = userview.windows(records, started)
    up = mon.first(lambda s: (s.spec_replicas or 0) > MIN_REPLICAS)
    up_desired = mon.first(lambda s: (s.desired or 0) > MIN_REPLICAS)
    first_up_decision = next((d for d in mon.decisions() if d["replicas"] > MIN_REPLICAS), None)
    broken = next((w for w in windows if w.p99_s > SLO_P99_S), None)
    op_broken = mon.first(lambda s: (s.autoscaling.get("currentP99Seconds") or 0.0) > SLO_P99_S)
    peak = max(
        (s for s in mon.samples if s.t <= load_end),
        key=lambda s: s.autoscaling.get("currentTokenRate") or 0.0,
    )
    pods = list(mon.pods.values())
    new_pods = sorted(
        (p for p in pods if (podfacts.read(p).created or 0.0) >= ramp_start - 1),
        key=lambda p: podfacts.read(p).created or 0.0,
    )
    warms = [t for p in new_pods if (t := userview.warm_time(p)) is not None]
    first_new_warm = min(warms) if warms else None
    deleted_during_load = [
        (e["involvedObject"]["name"], e.get("count", 1), e["message"])
        for e in kubectl.json("-n", namespace, "get", "events")["items"]
        if e.get("reason") == "SuccessfulDelete"
        and e["involvedObject"]["kind"] == "ReplicaSet"
        and from_rfc3339(e.get("firstTimestamp") or e["eventTime"]) <= load_end
    ]
    early = userview.requests_before_warm_up(records, pods)

    def p99_of(lo: float, hi: float) -> float:
        inside = [r for r in records if lo <= started + r.scheduled_s < hi]
        lat = [userview.user_latency(r, started) for r in inside]
        return float(np.percentile(lat, 99, method="higher")) if lat else math.nan

    summary = result.summary()
    print(
        f"\nRAMP load: {summary.count} requests, {summary.ok} ok, {summary.errors} errors, "
        f"{summary.no_endpoint} without endpoint; per endpoint {summary.per_endpoint}"
    )
    print("window(s from ramp start) requests tok/s client-P99(s)")
    for w in windows:
        tok = w.output_tokens_per_s
        print(f"  {w.start - ramp_start:+6.0f} {w.requests:5d} {tok:7.0f} {w.p99_s:7.2f}")
    print("operator samples (s from ramp start) spec desired currentTok predTok P99 reason")
    for s in mon.samples[::5]:
        a = s.autoscaling
        print(
            f"  {s.t - ramp_start:+6.0f} {s.spec_replicas} {s.desired} "
            f"{a.get('currentTokenRate')} {a.get('predictedTokenRate')} "
            f"{a.get('currentP99Seconds')} {a.get('reason')}"
        )

    def rel(t: float | None) -> str:
        return "never" if t is None else f"{t - ramp_start:+.1f} s"

    t_up = None if up is None else up.t
    t_dec = None if first_up_decision is None else from_rfc3339(first_up_decision["time"])
    print(
        f"from the ramp start: first scale-up decision {rel(t_dec)} (status.decisions, whole "
        f"seconds); Deployment spec.replicas > 1 seen {rel(t_up)}; first new pod warmed "
        f"{rel(first_new_warm)}"
    )
    print(
        f"P99 client-side (s): before the ramp {p99_of(started, ramp_start):.2f}, "
        f"during it {p99_of(ramp_start, load_end):.2f}, "
        f"last 30 s of load {p99_of(load_end - 30, load_end):.2f}; SLO {SLO_P99_S}"
    )
    print(
        f"first client window over the SLO: {rel(None if broken is None else broken.start)}; "
        f"first operator currentP99Seconds over the SLO: "
        f"{rel(None if op_broken is None else op_broken.t)}"
    )
    never_warmed = [p["metadata"]["name"] for p in pods if userview.warm_time(p) is None]
    print(f"pods seen: {len(pods)}; never warmed: {never_warmed}")
    print(f"load end -> back to {MIN_REPLICAS} replica(s): {down_at - load_end:.0f} s")
    print(f"status at the ramp's peak:\n{show(peak)}")

    # Everything that is wrong, together: the first failure alone hides the story.
    problems: list[str] = []
    # Replicas rose (Deployment and status.desiredReplicas) ...
    if up is None or up_desired is None:
        problems.append("the Deployment's replicas or status.desiredReplicas never rose")
    # ... before the P99 users saw crossed the SLO (client-side windows), and before the
    # operator's own P99 did (a LatencySLO scale-up would be reactive, not predictive).
    if up is not None and broken is not None and up.t >= broken.start:
        problems.append(
            f"client P99 {broken.p99_s:.2f} s crossed the {SLO_P99_S} s SLO in the window "
            f"starting {broken.start - ramp_start:.0f} s after the ramp began, before the "
            f"Deployment was scaled up ({up.t - ramp_start:.0f} s)"
        )
    if up is not None and op_broken is not None and up.t >= op_broken.t:
        problems.append("status.autoscaling.currentP99Seconds crossed the SLO before a scale-up")
    # While demand only grew, no pod was removed (the scale-down window is 30 s and the
    # load never fell during the ramp): a removed pod is capacity the operator asked for.
    shrank = [
        (round(b.t - ramp_start), a.spec_replicas, b.spec_replicas)
        for a, b in zip(mon.samples, mon.samples[1:], strict=False)
        if b.t <= load_end and (b.spec_replicas or 0) < (a.spec_replicas or 0)
    ]
    if shrank:
        problems.append(f"Deployment replicas went DOWN during the load (t, from, to): {shrank}")
    if deleted_during_load:
        problems.append(f"the ReplicaSet deleted pods during the load: {deleted_during_load}")
    # A ScaledUp event with a reason.
    ups = events(kubectl, namespace, name, "ScaledUp")
    if not any(reason in e["message"] for e in ups for reason in SCALE_REASONS):
        problems.append(f"no ScaledUp event with a reason: {[e['message'] for e in ups]}")
    # Status shows the current and predicted token rate and a reason.
    a = peak.autoscaling
    if not (
        (a.get("currentTokenRate") or 0) > 0
        and (a.get("predictedTokenRate") or 0) > 0
        and a.get("reason")
        and a.get("message")
    ):
        problems.append(f"status.autoscaling at the peak lacks rates or a reason: {show(peak)}")
    # No user request reached a pod before its warm-up finished.
    if first_new_warm is None:
        problems.append("no pod created after the ramp began was ever warmed")
    if early:
        problems.append(
            f"{len(early)} requests reached pods before their warm-up finished: "
            f"{[(r.pod_ip, who, round(r.sent_at - ramp_start, 1)) for r, who in early[:10]]}"
        )
    if summary.no_endpoint or summary.errors:
        problems.append(f"{summary.no_endpoint} without endpoint, {summary.errors} errors")
    # The way down: a ScaledDown event after the load stopped.
    downs = [
        e for e in events(kubectl, namespace, name, "ScaledDown") if event_time(e) >= load_end - 1
    ]
    if not downs:
        problems.append("no ScaledDown event after the load stopped")
    assert not problems, "\n".join(problems)


def test_prometheus_gone_holds_replicas_and_says_why_then_resumes(
    kubectl: Kubectl, kube_api: Any, namespace: str, served: str
) -> None:
    name = served
    # Enough load for 2-3 replicas (about 1000 tokens/s).
    requests, _ = phased_trace([Phase("busy", trace_start_s=1320, wall_s=240, speedup=2.5)])
    with watched(kube_api, namespace, name) as (mon, endpoints):
        replay = loadgen.start_replay(requests, endpoints=endpoints, **toy_load.REPLAY)
        stopped_at: float | None = None
        restarted_at: float | None = None
        try:
            wait_until(
                lambda: (
                    len(warmed_pods(kubectl, namespace, name)) >= 2
                    and deployment_replicas(kubectl, namespace, name) >= 2
                ),
                timeout=200,
                what="at least 2 warmed replicas under load",
            )
            try:
                harness_cluster.stop_prometheus()
                stopped_at = time.time()
                held = deployment_replicas(kubectl, namespace, name)
                replay.stop()
                # Longer than the scale-down window, twice over.
                time.sleep(2 * SCALE_DOWN_WINDOW_S + 10)
                unavailable = mon.first(
                    lambda s: (
                        (c := condition(s, "ScalingActive")) is not None
                        and c.get("status") == "False"
                        and c.get("reason") == "MetricsUnavailable"
                    ),
                    after=stopped_at,
                )
                during = [s for s in mon.samples if s.t >= stopped_at]
            finally:
                harness_cluster.start_prometheus()
                restarted_at = time.time()
        finally:
            replay.stop()
        replay.wait(120)

        recovered = wait_until(
            lambda: [
                e
                for e in events(kubectl, namespace, name, "MetricsRecovered")
                if event_time(e) >= restarted_at - 1
            ],
            timeout=120,
            what="a MetricsRecovered event after Prometheus came back",
        )
        wait_until(
            lambda: deployment_replicas(kubectl, namespace, name) == MIN_REPLICAS,
            timeout=300,
            what=f"replicas down to minReplicas {MIN_REPLICAS} without load",
        )
        down_at = time.time()

    lowest = min(s.spec_replicas or 0 for s in during)
    said = unavailable and condition(unavailable, "ScalingActive")
    print(
        f"\nPROMETHEUS down {restarted_at - stopped_at:.0f} s with {held} replicas; lowest "
        f"spec.replicas meanwhile {lowest}; condition {said}; "
        f"back to {MIN_REPLICAS} {down_at - restarted_at:.0f} s after the restart; "
        f"MetricsRecovered: {recovered[0]['message']}"
    )
    for s in mon.samples[::5]:
        a = s.autoscaling
        print(
            f"  {s.t - stopped_at:+6.0f} {s.spec_replicas} {s.desired} "
            f"{a.get('currentTokenRate')} {a.get('reason')}"
        )
    assert lowest >= held, f"scaled down from {held} to {lowest} while Prometheus was down"
    assert unavailable is not None, "ScalingActive never False/MetricsUnavailable"
    warnings = [
        e
        for e in events(kubectl, namespace, name, "MetricsUnavailable")
        if e["type"] == "Warning" and event_time(e) >= stopped_at - 1
    ]
    assert warnings, "no Warning event MetricsUnavailable"
    downs = [
        e
        for e in events(kubectl, namespace, name, "ScaledDown")
        if event_time(e) >= restarted_at - 1
    ]
    assert downs, "no ScaledDown event after Prometheus came back"
