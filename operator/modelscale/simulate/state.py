"""The replay's state: the replica table, the scraped metrics a `View` reads, and the
per-window scoring records; the methods that create and remove replicas, scrape and score.
The request flow that drives it tick by tick is `traffic.Engine`. Split out of engine.py;
behaviour unchanged."""

from __future__ import annotations

import math
from collections import deque
from typing import NamedTuple

import numpy as np

from modelscale.simulate.pool import F64, I64, Active, Feed, Pool, add_counts
from modelscale.simulate.replica import ReplicaParams, Slo
from modelscale.simulate.serving import ClassTally
from modelscale.simulate.trace import Gap, Trace, TraceStream
from modelscale.simulate.view import MAX_METRIC_WINDOW_S
from modelscale.simulate.windows import WindowStats, group_p99

ROUTING = ("least-loaded", "round-robin")


class _Serving(NamedTuple):
    gate: bool
    since: float
    until: float
    ids: I64


class EngineState:
    def __init__(
        self,
        source: Trace | TraceStream,
        *,
        params: ReplicaParams,
        slo: Slo,
        dt: float,
        initial_replicas: int,
        drain_s: float,
        routing: str,
        scrape_s: float,
        seed: int,
        keep_requests: bool,
        window_s: float,
    ) -> None:
        if routing not in ROUTING:
            raise ValueError(f"routing must be one of {', '.join(ROUTING)}, got {routing!r}")
        if scrape_s <= 0 or dt <= 0:
            raise ValueError(f"scrape_s and dt must be > 0, got {scrape_s:g} and {dt:g}")
        self.p, self.slo, self.dt = params, slo, dt
        self.routing, self.scrape_s = routing, scrape_s
        self.duration_s = source.duration_s
        self.n_windows = max(1, math.ceil(source.duration_s / window_s))
        self.window_s = window_s
        self.feed = Feed(
            source.chunks(),
            window_s=window_s,
            n_windows=self.n_windows,
            slo=slo,
            max_context=params.kv_capacity_tokens,
            serving=params.serving,
        )
        # Serving policy (None: one FIFO queue per pod, no limits): per-class limits and
        # the per-class tally of what was served and shed.
        self.serving = params.serving
        if params.serving and isinstance(source, Trace) and source.priority is not None:
            params.serving.from_levels(source.priority)  # refuse levels with no class up front
        self.tally = ClassTally(params.serving) if params.serving else None
        self.queue_limit = params.serving.max_queue() if params.serving else None
        self.queue_timeout = params.serving.timeouts() if params.serving else None
        self.rng = np.random.default_rng(seed)
        self.n_ticks = math.ceil((source.duration_s + drain_s) / dt)
        self.tick = 0
        self.keep = keep_requests
        n = source.requests if keep_requests and isinstance(source, Trace) else 0
        self.ttft = np.full(n, np.inf)
        self.tpot = np.full(n, np.inf)
        self.cold = np.zeros(n, dtype=bool)
        # Replica table, indexed by replica id (ids are never reused).
        cap = 64
        self.created_at = np.zeros(cap)
        self.ready_at = np.zeros(cap)
        self.warm_at = np.zeros(cap)
        self.pf_free = np.zeros(cap)
        self.running = np.zeros(cap, dtype=np.int64)
        self.waiting = np.zeros(cap, dtype=np.int64)
        self.reserved = np.zeros(cap)
        self.alive = np.zeros(cap, dtype=bool)
        self.initial = np.zeros(cap, dtype=bool)
        self.n_ids = 0
        self._alive_ids: I64 | None = None
        self._serving: _Serving | None = None  # serving_ids' answer while it holds
        self.draining: list[int] = []  # removed replicas still finishing their requests
        self.rr = 0
        self.admit_due = True
        self.n_active = 0  # live requests in `active` (finished ones are tombstones)
        self.startups: list[float] = []
        # Requests in flight: held by the gateway (no pod serving), queued in a pod,
        # admitted (prefilling or decoding).
        self.gateway = Pool.empty()
        self.queued = Pool.empty()
        self.qkey = np.zeros(0, dtype=np.int64)
        self.active = Active()
        # Scrapes: counters (cumulative output / prompt tokens) and per-pod gauges.
        self.cum_out = 0.0
        self.cum_in = 0.0
        self.scrape_t: list[float] = []
        self.scrape_out: list[float] = []
        self.scrape_in: list[float] = []
        self.next_scrape = scrape_s / 2.0
        self.gauge_running: tuple[float, ...] = ()
        self.gauge_waiting: tuple[float, ...] = ()
        self.gauge_kv: tuple[float, ...] = ()
        # Recent latency events for View.p99: (newest time, times, values) per tick.
        self.ev_ttft: deque[tuple[float, F64, F64]] = deque()
        self.ev_tpot: deque[tuple[float, F64, F64]] = deque()
        self.conc = np.zeros(max(1, math.ceil(MAX_METRIC_WINDOW_S / dt)) + 1)
        # Per-window scoring: outstanding requests per window, finished records buffered
        # until their window is complete.
        self.outstanding = np.zeros(self.n_windows, dtype=np.int64)
        self.arrived = np.zeros(self.n_windows, dtype=np.int64)
        self.fin_buf: list[tuple[I64, F64, F64, F64]] = []
        self.w_p99_ttft = np.full(self.n_windows, np.nan)
        self.w_p99_tpot = np.full(self.n_windows, np.nan)
        self.w_p99_excess = np.full(self.n_windows, np.nan)
        self.w_ok = np.zeros(self.n_windows, dtype=np.int64)
        self.rejected = 0
        self.cold_requests = 0
        for _ in range(initial_replicas):
            self._create(-params.horizon_s, startup=params.startup_s, initial=True)

    # -- replicas ---------------------------------------------------------------------

    def alive_ids(self) -> I64:
        if self._alive_ids is None:
            self._alive_ids = np.flatnonzero(self.alive[: self.n_ids])
        return self._alive_ids

    def _create(self, now: float, *, startup: float | None = None, initial: bool = False) -> None:
        if self.n_ids == self.created_at.size:
            for name in (
                "created_at",
                "ready_at",
                "warm_at",
                "pf_free",
                "running",
                "waiting",
                "reserved",
                "alive",
                "initial",
            ):
                arr = getattr(self, name)
                setattr(self, name, np.concatenate([arr, np.zeros_like(arr)]))
        p = self.p
        if startup is None:
            lo, hi = p.startup_bounds()
            draw = p.startup_s * math.exp(p.startup_sigma * float(self.rng.standard_normal()))
            startup = min(hi, max(lo, draw))
            self.startups.append(startup)
        r = self.n_ids
        self.n_ids += 1
        self.created_at[r] = now
        self.ready_at[r] = now + startup
        self.warm_at[r] = now + startup + p.warmup_s
        self.pf_free[r] = now
        self.alive[r] = True
        self.initial[r] = initial
        self._alive_ids = None
        self._serving = None

    def scale_to(self, desired: int, now: float) -> None:
        ids = self.alive_ids()
        for _ in range(desired - ids.size):
            self._create(now)
        if ids.size > desired:
            # ReplicaSet deletion order: not-ready pods first, then the newest.
            order = sorted(
                ids.tolist(), key=lambda r: (self.ready_at[r] <= now, -self.created_at[r])
            )
            gone = np.array(order[: ids.size - desired], dtype=np.int64)
            self.alive[gone] = False
            self._alive_ids = None
            self._serving = None
            self.draining += [int(r) for r in gone if self.running[r] > 0]
            # Their queued requests go back to the gateway, which routes them again.
            back = np.isin(self.queued.pod, gone)
            if back.any():
                moved = self.queued.take(np.flatnonzero(back))
                self.gateway = self.gateway.cat(moved)
                order_ids = np.argsort(self.gateway.id, kind="stable")
                self.gateway = self.gateway.take(order_ids)
                keep = np.flatnonzero(~back)
                self.queued, self.qkey = self.queued.take(keep), self.qkey[keep]
                self.waiting[gone] = 0

    def serving_ids(self, t: float, gate: bool) -> I64:
        """Alive replicas taking traffic at t: warm ones under the gate, else ready ones.
        Kept until the next replica crosses its threshold or the replicas change."""
        c = self._serving
        if c is not None and c.gate == gate and c.since <= t < c.until:
            return c.ids
        ids = self.alive_ids()
        at = (self.warm_at if gate else self.ready_at)[ids]
        out: I64 = ids[at <= t]
        later = at[at > t]
        until = float(later.min()) if later.size else math.inf
        self._serving = _Serving(gate=gate, since=t, until=until, ids=out)
        return out

    # -- metrics ----------------------------------------------------------------------

    def counter_at(self, counter: list[float], t: float) -> float:
        """Value of a scraped counter at the newest scrape at or before t (0 before)."""
        k = int(np.searchsorted(self.scrape_t, t, side="right")) - 1
        return counter[k] if k >= 0 else 0.0

    def _context(self) -> F64:
        a = self.active
        out: F64 = a.reserve - 1.0 - np.maximum(a.rem, 0.0)
        return out

    def scrape(self, t: float) -> None:
        self.scrape_t.append(t)
        self.scrape_out.append(self.cum_out)
        self.scrape_in.append(self.cum_in)
        ids = self.alive_ids()
        ids = ids[self.ready_at[ids] <= t]
        m = self.n_ids
        kv = np.bincount(self.active.pod, weights=self._context(), minlength=m)
        self.gauge_running = tuple(float(x) for x in self.running[ids])
        self.gauge_waiting = tuple(float(x) for x in self.waiting[ids])
        self.gauge_kv = tuple(float(x) for x in kv[ids] / self.p.kv_capacity_tokens)
        horizon = t - MAX_METRIC_WINDOW_S - self.scrape_s
        for ev in (self.ev_ttft, self.ev_tpot):
            while ev and ev[0][0] < horizon:
                ev.popleft()

    def totals(self) -> tuple[float, float, float]:
        """(running, waiting incl. the gateway, mean KV usage of ready pods) right now."""
        ids = self.alive_ids()
        t = self.tick * self.dt
        ready = ids[self.ready_at[ids] <= t]
        kv = 0.0
        if ready.size:
            per = np.bincount(self.active.pod, weights=self._context(), minlength=self.n_ids)
            kv = float(per[ready].mean() / self.p.kv_capacity_tokens)
        waiting = float(self.queued.size + self.gateway.size)
        return float(self.n_active), waiting, kv

    # -- requests ---------------------------------------------------------------------

    def _finish(self, reqs: Pool, ttft: F64, tpot: F64) -> None:
        """Record finished (or failed: inf) requests for per-window scoring."""
        win, ids = reqs.win, reqs.id
        excess = ttft - reqs.target
        self.fin_buf.append((win, ttft, tpot, excess))
        if self.tally is not None:
            self.tally.finished(reqs.prio, ttft, (excess <= 0) & (tpot <= self.slo.tpot_s))
        add_counts(self.outstanding, win, -1)
        if self.keep:
            self.ttft[ids] = ttft
            self.tpot[ids] = tpot

    def shed(self, pool: Pool, now: float, *, timeout: bool) -> None:
        """Refuse `pool`'s requests at `now` (queue full, or waited past the timeout): they
        count as misses, and per class as shed."""
        if pool.size == 0:
            return
        assert self.tally is not None  # only a serving policy sheds
        self.tally.shed(pool.prio, now - pool.arr, timeout=timeout)
        inf = np.full(pool.size, np.inf)
        self._finish(pool, inf, inf)

    def flush_windows(self, final: bool = False) -> None:
        """Score the windows whose requests have all finished."""
        if not self.fin_buf:
            return
        if final:
            safe = self.n_windows
        else:
            open_w = np.flatnonzero(self.outstanding > 0)
            nxt = self.feed.next_arrival
            w_next = self.n_windows if not math.isfinite(nxt) else int(nxt // self.window_s)
            safe = min(int(open_w[0]) if open_w.size else self.n_windows, w_next)
        win = np.concatenate([b[0] for b in self.fin_buf])
        ttft, tpot, excess = (np.concatenate([b[k] for b in self.fin_buf]) for k in (1, 2, 3))
        done = win < safe
        if not done.any():
            return
        w, a, b, c = win[done], ttft[done], tpot[done], excess[done]
        n = self.n_windows
        for target, values in ((self.w_p99_ttft, a), (self.w_p99_tpot, b), (self.w_p99_excess, c)):
            got = group_p99(w, values, n)
            has = ~np.isnan(got)
            target[has] = got[has]
        self.w_ok += np.bincount(w, weights=(c <= 0) & (b <= self.slo.tpot_s), minlength=n).astype(
            np.int64
        )
        rest = ~done
        self.fin_buf = [(win[rest], ttft[rest], tpot[rest], excess[rest])] if rest.any() else []

    def window_stats(self, gaps: tuple[Gap, ...]) -> WindowStats:
        self.flush_windows(final=True)
        gap = self.arrived == 0
        starts = np.arange(self.n_windows) * self.window_s
        for g in gaps:
            gap |= (starts < g.end_s) & (starts + self.window_s > g.start_s)
        met = (~gap) & (self.w_p99_excess <= 0) & (self.w_p99_tpot <= self.slo.tpot_s)
        return WindowStats(
            window_s=self.window_s,
            requests=self.arrived.copy(),
            p99_ttft=self.w_p99_ttft,
            p99_tpot=self.w_p99_tpot,
            p99_ttft_over_target=self.w_p99_excess,
            ok_requests=self.w_ok,
            gap=gap,
            met=met,
        )
