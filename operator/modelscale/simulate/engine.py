"""Discrete-time replay of a trace through replicas driven by one scaling policy.

Time advances in ticks of `dt` seconds (0.5 s by default). Within a tick:

1. the policy decides when its interval is due (it sees only a `View`: what its real
   counterpart would observe, with Prometheus lag where it reads Prometheus);
2. the gateway admits queued requests, then the tick's arrivals at their arrival time, each
   to the least-loaded serving replica with a free sequence slot (a central FIFO queue
   otherwise);
3. every replica prefills its admitted requests FIFO (exact times), then decodes its batch
   for the rest of the tick with ITL(b) / (1 - prefill share) per token.

Per-request TTFT and TPOT come out of that; they are exact up to the tick granularity of
admission from the queue and of the batch size, which changes only at tick boundaries.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from modelscale.simulate.replica import ReplicaParams
from modelscale.simulate.trace import Trace

SCRAPE_INTERVAL_S = 1.0  # Prometheus scrape interval; the newest sample is up to this old
RATE_WINDOW_S = 60.0  # rate(...[1m]) / histogram_quantile over 1 m


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


class View:
    """What a policy may look at. Metric methods return what Prometheus would answer at
    `now` (newest sample one scrape interval old, rate() over a window), except
    `concurrency`, which is what Knative's queue-proxy reports each second."""

    def __init__(self, engine: _Engine, now: float) -> None:
        self._e = engine
        self.now = now

    @property
    def created(self) -> int:
        """Replicas that exist and are not terminating (Deployment status.replicas)."""
        return len(self._e.alive)

    @property
    def container_ready(self) -> int:
        """Replicas whose container passed its readiness probe (warm or not)."""
        e = self._e
        return sum(1 for r in e.alive if e.ready_at[r] <= self.now)

    @property
    def warmed(self) -> int:
        e = self._e
        return sum(1 for r in e.alive if e.warm_at[r] <= self.now)

    @property
    def queue_depth(self) -> int:
        return len(self._e.queue)

    def _tick_at(self, t: float) -> int:
        """Index of the last completed tick ending at or before t (-1 if none)."""
        return min(self._e.tick, math.floor(t / self._e.dt + 1e-9)) - 1

    def token_rate(self, *, window_s: float = RATE_WINDOW_S) -> float:
        """Output tokens/s over the window ending at the newest scrape."""
        e = self._e
        s = self.now - SCRAPE_INTERVAL_S
        k1 = self._tick_at(s)
        k0 = self._tick_at(s - window_s)
        if k1 < 0:
            return 0.0
        c1 = e.cum_tokens[k1]
        c0 = e.cum_tokens[k0] if k0 >= 0 else 0.0
        span = (k1 - max(k0, -1)) * e.dt
        return float((c1 - c0) / span) if span > 0 else 0.0

    def p99(self, *, signal: str = "ttft", window_s: float = RATE_WINDOW_S) -> float | None:
        """P99 of TTFT ("ttft") or TPOT ("tpot") of requests whose first token (TTFT) or
        last token (TPOT) fell in the window ending at the newest scrape."""
        e = self._e
        s = self.now - SCRAPE_INTERVAL_S
        lo = np.searchsorted(e.trace.arrival_s, s - window_s - 900.0)
        hi = np.searchsorted(e.trace.arrival_s, s, side="right")
        if signal == "ttft":
            at, val = e.ftt[lo:hi], e.ttft[lo:hi]
        else:
            at, val = e.finish[lo:hi], e.tpot[lo:hi]
        sel = val[(at > s - window_s) & (at <= s)]
        if sel.size == 0:
            return None
        return float(np.quantile(sel, 0.99))

    def concurrency(self, *, window_s: float) -> float:
        """Mean in-flight requests (running plus queued) over the last `window_s`."""
        e = self._e
        k1 = e.tick - 1
        if k1 < 0:
            return 0.0
        n = max(1, round(window_s / e.dt))
        k0 = max(0, k1 - n + 1)
        return float(e.conc[k0 : k1 + 1].mean())


@dataclass
class RunResult:
    policy: str
    ttft: NDArray[np.float64]
    tpot: NDArray[np.float64]
    cold: NDArray[np.bool_]
    replica_seconds: float
    scale_events: int
    # Timeline sampled once per `sample_s`: time, replicas that exist, replicas serving warm.
    times: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    replicas: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    warmed: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))


class _Engine:
    def __init__(
        self,
        trace: Trace,
        *,
        params: ReplicaParams,
        dt: float,
        initial_replicas: int,
        max_replicas: int,
        drain_s: float,
    ) -> None:
        self.trace, self.p, self.dt = trace, params, dt
        self.max_replicas = max_replicas
        n = trace.requests
        self.ftt = np.full(n, np.inf)
        self.ttft = np.full(n, np.inf)
        self.finish = np.full(n, np.inf)
        self.tpot = np.full(n, np.inf)
        self.cold = np.zeros(n, dtype=bool)
        self.rid = np.zeros(n, dtype=np.int64)
        self.remaining = (trace.output_tokens - 1).astype(np.float64)
        self.n_ticks = math.ceil((trace.duration_s + drain_s) / dt)
        self.cum_tokens = np.zeros(self.n_ticks)
        self.conc = np.zeros(self.n_ticks)
        self.tick = 0
        # Replica table, indexed by replica id (ids are never reused).
        cap = 64
        self.created_at = np.zeros(cap)
        self.ready_at = np.zeros(cap)
        self.warm_at = np.zeros(cap)
        self.running = np.zeros(cap, dtype=np.int64)
        self.pf_free = np.zeros(cap)
        self.n_ids = 0
        self.alive: list[int] = []
        self.draining: list[int] = []
        self.queue: deque[int] = deque()
        self.pf_tick = np.zeros(cap)
        self._t0 = self._t1 = 0.0
        self.active = np.zeros(0, dtype=np.int64)
        self.act_rid = np.zeros(0, dtype=np.int64)
        self.act_ftt = np.zeros(0)
        self.act_rem = np.zeros(0)
        for _ in range(initial_replicas):
            self._create(-params.horizon_s)

    def _create(self, now: float) -> None:
        if self.n_ids == self.created_at.size:
            for name in ("created_at", "ready_at", "warm_at", "running", "pf_free"):
                arr = getattr(self, name)
                setattr(self, name, np.concatenate([arr, np.zeros_like(arr)]))
        r = self.n_ids
        self.n_ids += 1
        self.created_at[r] = now
        self.ready_at[r] = now + self.p.startup_s
        self.warm_at[r] = now + self.p.horizon_s
        self.running[r] = 0
        self.pf_free[r] = now
        self.alive.append(r)

    def scale_to(self, desired: int, now: float) -> None:
        while len(self.alive) < desired:
            self._create(now)
        if len(self.alive) > desired:
            # ReplicaSet deletion order: not-ready pods first, then the newest.
            order = sorted(self.alive, key=lambda r: (self.ready_at[r] <= now, -self.created_at[r]))
            for r in order[: len(self.alive) - desired]:
                self.alive.remove(r)
                if self.running[r] > 0:
                    self.draining.append(r)

    def _admit(self, i: int, r: int, t: float) -> None:
        p = self.p
        warm = t >= self.warm_at[r]
        slow = 1.0 if warm else p.cold_slowdown
        start = max(t, self.pf_free[r])
        ftt = start + self.trace.input_tokens[i] / p.prefill_tokens_per_s * slow
        self.pf_free[r] = ftt
        # Prefill time inside this tick: the share of the tick decode loses to prefill.
        self.pf_tick[r] += max(0.0, min(ftt, self._t1) - max(start, self._t0))
        self.ftt[i] = ftt
        self.ttft[i] = ftt - self.trace.arrival_s[i]
        self.rid[i] = r
        self.cold[i] = not warm
        self.running[r] += 1

    def _serving(self, t: float, gate: bool) -> NDArray[np.int64]:
        at = self.warm_at if gate else self.ready_at
        return np.array([r for r in self.alive if at[r] <= t], dtype=np.int64)

    def step(self, gate: bool, next_arrival: int) -> int:
        """Advance one tick; returns the index of the next arrival not yet handled."""
        t0 = self.tick * self.dt
        t1 = t0 + self.dt
        cap = self.p.max_batch
        self._t0, self._t1 = t0, t1
        # Backlogged prefill carried over from earlier ticks keeps the replica busy.
        self.pf_tick = np.clip(self.pf_free - t0, 0.0, self.dt)
        serving = self._serving(t0, gate)
        admitted: list[int] = []
        if serving.size:
            while self.queue:
                load = self.running[serving]
                j = int(np.argmin(load))
                if load[j] >= cap:
                    break
                i = self.queue.popleft()
                self._admit(i, int(serving[j]), t0)
                admitted.append(i)
        arrivals = self.trace.arrival_s
        n = arrivals.size
        i = next_arrival
        while i < n and arrivals[i] < t1:
            if serving.size and not self.queue:
                load = self.running[serving]
                j = int(np.argmin(load))
                if load[j] < cap:
                    self._admit(i, int(serving[j]), float(arrivals[i]))
                    admitted.append(i)
                    i += 1
                    continue
            self.queue.append(i)
            i += 1
        if admitted:
            new = np.array(admitted, dtype=np.int64)
            self.active = np.concatenate([self.active, new])
            self.act_rid = np.concatenate([self.act_rid, self.rid[new]])
            self.act_ftt = np.concatenate([self.act_ftt, self.ftt[new]])
            self.act_rem = np.concatenate([self.act_rem, self.remaining[new]])
        tokens = 0.0
        a = self.active
        if a.size:
            # Compact per-active-request arrays (rid, ftt, remaining) parallel to `active`.
            rids, ftt, before = self.act_rid, self.act_ftt, self.act_rem
            decoding = ftt < t1
            m = self.n_ids
            batch = np.bincount(rids, weights=decoding, minlength=m)
            busy = self.pf_tick[:m] * (1.0 / self.dt)
            share = np.maximum(1.0 - busy, self.p.min_decode_share)
            slow = np.where(self.warm_at[:m] > t0, self.p.cold_slowdown, 1.0) / share
            itl = (self.p.itl_alpha_s + self.p.itl_beta_s * batch) * slow
            req_itl = itl[rids]
            tau = t1 - np.maximum(t0, ftt)
            gen = np.where(decoding, tau, 0.0) / req_itl
            after = before - gen
            tokens = float(np.minimum(gen, np.maximum(before, 0.0)).sum())
            tokens += float(np.count_nonzero(decoding & (ftt >= t0)))
            done = decoding & (after <= 0.0)
            if done.any():
                d = a[done]
                fin = np.maximum(t1 + after[done] * req_itl[done], ftt[done])
                self.finish[d] = fin
                outs = self.trace.output_tokens[d]
                per_token = (fin - ftt[done]) / np.maximum(outs - 1, 1)
                self.tpot[d] = np.where(outs > 1, per_token, 0.0)
                self.running[:m] -= np.bincount(rids[done], minlength=m)
                keep = ~done
                self.active = a[keep]
                self.act_rid, self.act_ftt, self.act_rem = rids[keep], ftt[keep], after[keep]
                if self.draining:
                    self.draining = [r for r in self.draining if self.running[r] > 0]
            else:
                self.act_rem = after
        prev = self.cum_tokens[self.tick - 1] if self.tick else 0.0
        self.cum_tokens[self.tick] = prev + tokens
        self.conc[self.tick] = self.active.size + len(self.queue)
        self.tick += 1
        return i


def run(
    trace: Trace,
    policy: Policy,
    *,
    params: ReplicaParams,
    initial_replicas: int,
    max_replicas: int = 256,
    dt: float = 0.5,
    drain_s: float = 600.0,
    sample_s: float = 10.0,
) -> RunResult:
    """Replay `trace` under `policy`. Starts with `initial_replicas` warm replicas (every
    policy starts sized for the trace's first minutes, as a running service would be).
    Replica-seconds count every replica that exists (starting, warming, serving or
    draining) until the end of the trace; the replay continues up to `drain_s` after it so
    that queued requests finish and are measured."""
    e = _Engine(
        trace,
        params=params,
        dt=dt,
        initial_replicas=initial_replicas,
        max_replicas=max_replicas,
        drain_s=drain_s,
    )
    # The replay starts cold, but the service it models has been running: no decision
    # until one rate() window of metrics exists, so no policy acts on a half-empty window.
    next_decision = max(policy.interval_s, RATE_WINDOW_S)
    desired = initial_replicas
    events = 0
    replica_seconds = 0.0
    nxt = 0
    every = max(1, round(sample_s / dt))
    times: list[float] = []
    reps: list[float] = []
    warm: list[float] = []
    n = trace.requests
    while e.tick < e.n_ticks:
        t0 = e.tick * dt
        if t0 >= trace.duration_s and nxt >= n and not e.queue and e.active.size == 0:
            break
        if t0 >= next_decision - 1e-9:
            want = max(1, min(max_replicas, int(policy.decide(View(e, t0)))))
            if want != desired:
                events += 1
                desired = want
            e.scale_to(desired, t0)
            next_decision += policy.interval_s
        if t0 < trace.duration_s:
            replica_seconds += dt * (len(e.alive) + len(e.draining))
            if e.tick % every == 0:
                times.append(t0)
                reps.append(len(e.alive) + len(e.draining))
                warm.append(sum(1 for r in e.alive if e.warm_at[r] <= t0))
        nxt = e.step(policy.warmup_gate, nxt)
    return RunResult(
        policy=policy.name,
        ttft=e.ttft,
        tpot=e.tpot,
        cold=e.cold,
        replica_seconds=replica_seconds,
        scale_events=events,
        times=np.array(times),
        replicas=np.array(reps, dtype=np.float64),
        warmed=np.array(warm, dtype=np.float64),
    )
