"""Discrete-time replay of a trace through replicas driven by one scaling policy.

Time advances in ticks of `dt` seconds (0.5 s by default). Within a tick:

1. Prometheus scrapes the pods when a scrape is due (every `scrape_s`, 15 s by default,
   half an interval out of phase with the policies' clocks); the policy decides when its
   interval is due, seeing only a `View`: what its real counterpart would observe;
2. the gateway routes the tick's arrivals (and any it held while no pod served) to a
   serving pod by its routing rule — least-loaded (fewest running + waiting requests, as
   least-request gateways do) or round-robin — into that pod's FIFO queue;
3. each pod admits from its queue, in order, every request whose whole context (prompt
   plus output) still fits in its KV cache while fewer than `max_batch` sequences run;
   admitted prompts prefill FIFO (exact times, n / rate + quadratic attention term);
4. every pod decodes its batch for the rest of the tick at ITL(batch, context) / (1 -
   prefill share) per token.

The trace is consumed chunk by chunk and per-request state exists only while a request is
in flight, so memory does not grow with the trace; what scoring needs is kept per window
(`RunResult.windows`). For an in-memory `Trace` the per-request TTFT/TPOT arrays are kept
too (`keep_requests`).

This module holds the tick loop (`run`), `Policy` and `RunResult`, and re-exports the
names other modules import from it. The parts: `view` (what a policy observes), `state`
(replica table, scrapes, scoring records), `traffic` (routing, admission, prefill and
decode per tick), `pool` (requests as arrays, the trace feed), `windows` (per-window
scores).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from modelscale.simulate.pool import F64, I64, least_loaded
from modelscale.simulate.replica import ReplicaParams, Slo
from modelscale.simulate.serving import ClassStats
from modelscale.simulate.state import ROUTING
from modelscale.simulate.trace import Gap, Trace, TraceStream
from modelscale.simulate.traffic import ADMIT_SCAN, Engine
from modelscale.simulate.view import (
    MAX_METRIC_WINDOW_S,
    RATE_WINDOW_S,
    SCRAPE_INTERVAL_S,
    PodMetric,
    View,
)
from modelscale.simulate.windows import WINDOW_S, WindowStats

__all__ = [
    "ADMIT_SCAN",
    "F64",
    "I64",
    "MAX_METRIC_WINDOW_S",
    "RATE_WINDOW_S",
    "ROUTING",
    "SCRAPE_INTERVAL_S",
    "WINDOW_S",
    "PodMetric",
    "Policy",
    "RunResult",
    "View",
    "WindowStats",
    "least_loaded",
    "run",
]


class Policy(Protocol):
    """A scaling policy as the simulator drives it."""

    name: str
    interval_s: float
    # True: a replica gets traffic only once warm (modelscale's readiness gate). False:
    # traffic reaches it when its container is ready, before warm-up completes.
    warmup_gate: bool

    def decide(self, view: View) -> int:
        """Desired replicas at `view.now`."""
        ...


@dataclass
class RunResult:
    policy: str
    # Per request in arrival order (only when the run kept requests; else empty).
    ttft: F64
    tpot: F64
    cold: NDArray[np.bool_]
    replica_seconds: float
    scale_events: int
    # Timeline sampled once per `sample_s`: time, replicas that exist, replicas serving
    # warm, running and waiting requests (all pods and the gateway), mean KV-cache usage.
    times: F64 = field(default_factory=lambda: np.zeros(0))
    replicas: F64 = field(default_factory=lambda: np.zeros(0))
    warmed: F64 = field(default_factory=lambda: np.zeros(0))
    running: F64 = field(default_factory=lambda: np.zeros(0))
    waiting: F64 = field(default_factory=lambda: np.zeros(0))
    kv_usage: F64 = field(default_factory=lambda: np.zeros(0))
    windows: WindowStats | None = None
    requests: int = 0
    # Requests whose context exceeds one replica's KV cache: refused (as vLLM refuses a
    # prompt over max_model_len), counted as SLO misses.
    rejected: int = 0
    cold_requests: int = 0
    gaps: tuple[Gap, ...] = ()
    startup_s: F64 = field(default_factory=lambda: np.zeros(0))  # per replica created
    # Per priority class, under a serving policy (ReplicaParams.serving); () without one.
    classes: tuple[ClassStats, ...] = ()


def run(
    trace: Trace | TraceStream,
    policy: Policy,
    *,
    params: ReplicaParams,
    initial_replicas: int,
    max_replicas: int = 256,
    dt: float = 0.5,
    drain_s: float = 600.0,
    sample_s: float = 10.0,
    routing: str = "least-loaded",
    scrape_s: float = SCRAPE_INTERVAL_S,
    seed: int = 0,
    slo: Slo | None = None,
    keep_requests: bool | None = None,
    window_s: float = WINDOW_S,
) -> RunResult:
    """Replay `trace` under `policy`. Starts with `initial_replicas` warm replicas.
    Replica-seconds count every replica that exists (starting, warming, serving or
    draining) until the end of the trace; the replay continues up to `drain_s` after it so
    that queued requests finish and are measured (what has not finished by then counts as
    a miss). `routing` picks the gateway's rule ("least-loaded" or "round-robin");
    `scrape_s` the Prometheus scrape interval; `seed` the replicas' start-up times; `slo`
    what `RunResult.windows` scores against (default `Slo()`); `keep_requests` (default:
    True for an in-memory `Trace`, False for a `TraceStream`) keeps per-request TTFT/TPOT."""
    keep = isinstance(trace, Trace) if keep_requests is None else keep_requests
    if keep and not isinstance(trace, Trace):
        raise ValueError("keep_requests needs an in-memory Trace; materialise the stream first")
    e = Engine(
        trace,
        params=params,
        slo=slo or Slo(),
        dt=dt,
        initial_replicas=initial_replicas,
        drain_s=drain_s,
        routing=routing,
        scrape_s=scrape_s,
        seed=seed,
        keep_requests=keep,
        window_s=window_s,
    )
    # The replay starts cold, but the service it models has been running: no decision
    # until one rate() window of metrics exists, so no policy acts on a half-empty window.
    next_decision = max(policy.interval_s, RATE_WINDOW_S)
    desired = initial_replicas
    events = 0
    replica_seconds = 0.0
    every = max(1, round(sample_s / dt))
    flush_every = max(1, round(window_s / dt))
    cols: dict[str, list[float]] = {k: [] for k in ("t", "rep", "warm", "run", "wait", "kv")}
    duration = trace.duration_s
    while e.tick < e.n_ticks:
        t0 = e.tick * dt
        if t0 >= duration and e.idle():
            break
        if t0 >= e.next_scrape - 1e-9:
            e.scrape(t0)
            e.next_scrape += scrape_s * max(1, math.floor((t0 - e.next_scrape) / scrape_s + 1))
        if t0 >= next_decision - 1e-9:
            want = max(1, min(max_replicas, int(policy.decide(View(e, t0)))))
            if want != desired:
                events += 1
                desired = want
            e.scale_to(desired, t0)
            next_decision += policy.interval_s
        if t0 < duration:
            ids = e.alive_ids()
            draining = len(e.draining)
            replica_seconds += dt * (ids.size + draining)
            if e.tick % every == 0:
                run_, wait, kv = e.totals()
                cols["t"].append(t0)
                cols["rep"].append(ids.size + draining)
                cols["warm"].append(int(np.count_nonzero(e.warm_at[ids] <= t0)))
                cols["run"].append(run_)
                cols["wait"].append(wait)
                cols["kv"].append(kv)
        e.step(policy.warmup_gate)
        if e.tick % flush_every == 0:
            e.flush_windows()
    e.abandon()
    windows = e.window_stats(trace.gaps)
    return RunResult(
        policy=policy.name,
        ttft=e.ttft,
        tpot=e.tpot,
        cold=e.cold,
        replica_seconds=replica_seconds,
        scale_events=events,
        times=np.array(cols["t"]),
        replicas=np.array(cols["rep"], dtype=np.float64),
        warmed=np.array(cols["warm"], dtype=np.float64),
        running=np.array(cols["run"], dtype=np.float64),
        waiting=np.array(cols["wait"], dtype=np.float64),
        kv_usage=np.array(cols["kv"], dtype=np.float64),
        windows=windows,
        requests=e.feed.next_id,
        rejected=e.rejected,
        cold_requests=e.cold_requests,
        gaps=trace.gaps,
        startup_s=np.array(e.startups),
        classes=e.tally.stats() if e.tally is not None else (),
    )
