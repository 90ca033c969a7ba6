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
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

import numpy as np
from numpy.typing import NDArray

from modelscale.simulate.replica import ReplicaParams, Slo
from modelscale.simulate.trace import Chunk, Gap, Trace, TraceStream

SCRAPE_INTERVAL_S = 15.0  # Prometheus scrape interval (default; 30 s is also common)
RATE_WINDOW_S = 60.0  # rate(...[1m]) / histogram_quantile over 1 m
MAX_METRIC_WINDOW_S = 900.0  # the longest window a View method looks back over
WINDOW_S = 60.0  # scoring window
ROUTING = ("least-loaded", "round-robin")
ADMIT_SCAN = 32  # queued requests per pod considered for admission in one tick
_KEY_POD = 1 << 34  # sort key of a queued request: pod * _KEY_POD + request id

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]


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


class PodMetric(NamedTuple):
    """A per-pod gauge as the newest scrape saw it, one value per scraped pod (pods whose
    container is ready; in pod-creation order)."""

    per_pod: tuple[float, ...]

    @property
    def total(self) -> float:
        return float(sum(self.per_pod))

    @property
    def mean(self) -> float:
        return self.total / len(self.per_pod) if self.per_pod else 0.0

    @property
    def max(self) -> float:
        return max(self.per_pod) if self.per_pod else 0.0


class View:
    """What a policy may look at. Metric methods return what Prometheus would answer at
    `now`: the newest scrape (`sample_time`, up to one scrape interval old) and rate() /
    quantiles over a window ending there. Exceptions, as their real sources are: `created`,
    `container_ready`, `warmed` (the Kubernetes API) and `concurrency` (Knative's
    queue-proxies report each second)."""

    def __init__(self, engine: _Engine, now: float) -> None:
        self._e = engine
        self.now = now

    @property
    def created(self) -> int:
        """Replicas that exist and are not terminating (Deployment status.replicas)."""
        return int(self._e.alive_ids().size)

    @property
    def container_ready(self) -> int:
        """Replicas whose container passed its readiness probe (warm or not)."""
        e = self._e
        ids = e.alive_ids()
        return int(np.count_nonzero(e.ready_at[ids] <= self.now))

    @property
    def warmed(self) -> int:
        e = self._e
        ids = e.alive_ids()
        return int(np.count_nonzero(e.warm_at[ids] <= self.now))

    @property
    def sample_time(self) -> float:
        """Time of the newest scrape (0 before the first)."""
        return self._e.scrape_t[-1] if self._e.scrape_t else 0.0

    @property
    def queue_depth(self) -> int:
        """Requests waiting in the pods' queues at the newest scrape."""
        return round(self.waiting_requests().total)

    def running_requests(self) -> PodMetric:
        """Requests each pod is serving (prefilling or decoding), as vLLM's
        `num_requests_running` gauge shows at the newest scrape."""
        return PodMetric(self._e.gauge_running)

    def waiting_requests(self) -> PodMetric:
        """Requests queued in each pod (admission waits for KV cache or a batch slot), as
        vLLM's `num_requests_waiting` gauge shows at the newest scrape."""
        return PodMetric(self._e.gauge_waiting)

    def kv_cache_usage(self) -> PodMetric:
        """Fraction (0..1) of each pod's KV cache holding context tokens, as vLLM's
        `kv_cache_usage_perc` gauge shows at the newest scrape."""
        return PodMetric(self._e.gauge_kv)

    def observed_horizon(self) -> float | None:
        """Median creation -> warm seconds of the replicas created during the replay that
        have become warm by now (what the operator measures from its pods' conditions);
        None until one has."""
        e = self._e
        ids = np.arange(e.n_ids)
        done = ids[(~e.initial[: e.n_ids]) & (e.warm_at[: e.n_ids] <= self.now)]
        if done.size == 0:
            return None
        return float(np.median(e.warm_at[done] - e.created_at[done]))

    def _check(self, window_s: float) -> None:
        if not 0 < window_s <= MAX_METRIC_WINDOW_S:
            raise ValueError(
                f"metric window must be in (0, {MAX_METRIC_WINDOW_S:g}] s, got {window_s:g}"
            )

    def _rate(self, counter: list[float], window_s: float) -> float:
        self._check(window_s)
        e = self._e
        if not e.scrape_t:
            return 0.0
        s = e.scrape_t[-1]
        a = max(0.0, s - window_s)
        if s <= a:
            return 0.0
        return (counter[-1] - e.counter_at(counter, a)) / (s - a)

    def token_rate(self, *, window_s: float = RATE_WINDOW_S) -> float:
        """Output tokens/s over the window ending at the newest scrape."""
        return self._rate(self._e.scrape_out, window_s)

    def prompt_token_rate(self, *, window_s: float = RATE_WINDOW_S) -> float:
        """Prompt tokens/s over the window ending at the newest scrape, as
        rate(vllm:prompt_tokens_total[1m]) shows it: a prompt counts when its prefill ends."""
        return self._rate(self._e.scrape_in, window_s)

    def p99(self, *, signal: str = "ttft", window_s: float = RATE_WINDOW_S) -> float | None:
        """P99 of TTFT ("ttft") or TPOT ("tpot") of requests whose first token (TTFT) or
        last token (TPOT) fell in the window ending at the newest scrape."""
        if signal not in ("ttft", "tpot"):
            raise ValueError(f"signal must be 'ttft' or 'tpot', got {signal!r}")
        self._check(window_s)
        if not self._e.scrape_t:
            return None
        s = self._e.scrape_t[-1]
        events = self._e.ev_ttft if signal == "ttft" else self._e.ev_tpot
        parts = [v[(at > s - window_s) & (at <= s)] for hi, at, v in events if hi > s - window_s]
        sel = np.concatenate(parts) if parts else np.zeros(0)
        if sel.size == 0:
            return None
        return float(np.quantile(sel, 0.99))

    def concurrency(self, *, window_s: float) -> float:
        """Mean in-flight requests (running plus queued) over the last `window_s`."""
        self._check(window_s)
        e = self._e
        k1 = e.tick - 1
        if k1 < 0:
            return 0.0
        n = min(k1 + 1, max(1, round(window_s / e.dt)))
        idx = np.arange(k1 - n + 1, k1 + 1) % e.conc.size
        return float(e.conc[idx].mean())


@dataclass
class WindowStats:
    """Per scoring window (requests grouped by arrival, `window_s` each): how many arrived,
    P99 TTFT / TPOT (NaN when none), P99 of TTFT minus each request's TTFT target (<= 0:
    TTFT met), requests that met both targets, and `gap`: no requests, or inside a gap of
    the trace's data. `met` = not a gap, P99 TTFT within target and P99 TPOT within target:
    gaps are never scored as met."""

    window_s: float
    requests: I64
    p99_ttft: F64
    p99_tpot: F64
    p99_ttft_over_target: F64
    ok_requests: I64
    gap: NDArray[np.bool_]
    met: NDArray[np.bool_]

    @property
    def start_s(self) -> F64:
        return np.arange(self.requests.size) * self.window_s


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


@dataclass
class _Pool:
    """Requests as a struct of arrays: every pool (gateway, pod queues, admitted) has every
    field; those a pool does not use stay zero."""

    id: I64
    arr: F64
    inp: I64
    out: I64
    cached: I64
    win: I64
    pod: I64
    cold: NDArray[np.bool_]
    reserve: F64
    ftt: F64
    rem: F64

    @classmethod
    def empty(cls) -> _Pool:
        i, f = np.zeros(0, dtype=np.int64), np.zeros(0)
        return cls(i, f, i, i, i, i, i, np.zeros(0, dtype=bool), f, f, f)

    @classmethod
    def arrivals(cls, *, ids: I64, arr: F64, inp: I64, out: I64, cached: I64, win: I64) -> _Pool:
        n = ids.size
        i, f = np.zeros(n, dtype=np.int64), np.zeros(n)
        reserve = (inp + out).astype(np.float64)  # the whole context, held in the KV cache
        return cls(ids, arr, inp, out, cached, win, i, np.zeros(n, dtype=bool), reserve, f, f)

    @property
    def size(self) -> int:
        return int(self.id.size)

    def insert(self, pos: I64, other: _Pool) -> _Pool:
        """`other`'s requests inserted before the positions `pos` (np.insert)."""
        return _Pool(
            np.insert(self.id, pos, other.id),
            np.insert(self.arr, pos, other.arr),
            np.insert(self.inp, pos, other.inp),
            np.insert(self.out, pos, other.out),
            np.insert(self.cached, pos, other.cached),
            np.insert(self.win, pos, other.win),
            np.insert(self.pod, pos, other.pod),
            np.insert(self.cold, pos, other.cold),
            np.insert(self.reserve, pos, other.reserve),
            np.insert(self.ftt, pos, other.ftt),
            np.insert(self.rem, pos, other.rem),
        )

    def delete(self, idx: I64) -> _Pool:
        return _Pool(
            np.delete(self.id, idx),
            np.delete(self.arr, idx),
            np.delete(self.inp, idx),
            np.delete(self.out, idx),
            np.delete(self.cached, idx),
            np.delete(self.win, idx),
            np.delete(self.pod, idx),
            np.delete(self.cold, idx),
            np.delete(self.reserve, idx),
            np.delete(self.ftt, idx),
            np.delete(self.rem, idx),
        )

    def slice(self, a: int, b: int) -> _Pool:
        return _Pool(
            self.id[a:b],
            self.arr[a:b],
            self.inp[a:b],
            self.out[a:b],
            self.cached[a:b],
            self.win[a:b],
            self.pod[a:b],
            self.cold[a:b],
            self.reserve[a:b],
            self.ftt[a:b],
            self.rem[a:b],
        )

    def take(self, idx: NDArray[np.generic]) -> _Pool:
        return _Pool(
            self.id[idx],
            self.arr[idx],
            self.inp[idx],
            self.out[idx],
            self.cached[idx],
            self.win[idx],
            self.pod[idx],
            self.cold[idx],
            self.reserve[idx],
            self.ftt[idx],
            self.rem[idx],
        )

    def cat(self, other: _Pool) -> _Pool:
        if self.size == 0:
            return other
        if other.size == 0:
            return self
        cat = np.concatenate
        return _Pool(
            cat((self.id, other.id)),
            cat((self.arr, other.arr)),
            cat((self.inp, other.inp)),
            cat((self.out, other.out)),
            cat((self.cached, other.cached)),
            cat((self.win, other.win)),
            cat((self.pod, other.pod)),
            cat((self.cold, other.cold)),
            cat((self.reserve, other.reserve)),
            cat((self.ftt, other.ftt)),
            cat((self.rem, other.rem)),
        )


def least_loaded(load: I64, k: int) -> I64:
    """Positions (into `load`) that k successive arrivals go to when each goes to the
    currently least-loaded pod (ties: the lowest position), as one vectorised step."""
    if k == 0:
        return np.zeros(0, dtype=np.int64)
    if k <= 4:  # a few arrivals: one argmin each is cheaper
        work = load.copy()
        picks = np.empty(k, dtype=np.int64)
        for i in range(k):
            j = int(np.argmin(work))
            picks[i] = j
            work[j] += 1
        return picks
    lo = int(load.min())
    hi = lo + k  # at level hi the least-loaded pod alone offers k + 1 slots
    while lo < hi:  # smallest level L whose slots (levels load..L of every pod) >= k
        mid = (lo + hi) // 2
        if int(np.maximum(0, mid + 1 - load).sum()) >= k:
            hi = mid
        else:
            lo = mid + 1
    counts = np.maximum(0, lo + 1 - load)
    pos = np.repeat(np.arange(load.size), counts)
    starts = np.repeat(load, counts)
    level = starts + (np.arange(pos.size) - np.repeat(np.cumsum(counts) - counts, counts))
    order = np.lexsort((pos, level))[:k]
    out: I64 = pos[order]
    return out


def _add_counts(target: I64, idx: I64, sign: int = 1) -> None:
    """target[idx] += sign for every element of idx (idx spans few distinct values)."""
    if idx.size == 0:
        return
    first = int(idx[0])
    if idx.size == 1 or (idx == first).all():
        target[first] += sign * idx.size
        return
    lo = int(idx.min())
    counts = np.bincount(idx - lo)
    target[lo : lo + counts.size] += sign * counts


def _run_starts(keys: I64) -> NDArray[np.bool_]:
    """True where a sorted key array starts a new run of equal keys."""
    out = np.empty(keys.size, dtype=bool)
    if keys.size:
        out[0] = True
        np.not_equal(keys[1:], keys[:-1], out=out[1:])
    return out


def _segment_starts(keys: I64) -> I64:
    """For each element of a sorted key array, the index where its key's run starts."""
    out: I64 = np.searchsorted(keys, keys, side="left")
    return out


def _group_p99(win: I64, values: F64, n: int) -> F64:
    """P99 (method "higher", so inf counts as a miss) of `values` per window index."""
    out = np.full(n, np.nan)
    if win.size == 0:
        return out
    order = np.lexsort((values, win))
    w, v = win[order], values[order]
    starts = np.flatnonzero(_run_starts(w))
    counts = np.diff(np.append(starts, w.size))
    pick = starts + np.ceil(0.99 * (counts - 1)).astype(np.int64)
    out[w[starts]] = v[pick]
    return out


class _Feed:
    """Arrivals from the trace's chunks, handed out tick by tick."""

    def __init__(self, chunks: Iterator[Chunk], *, window_s: float, n_windows: int) -> None:
        self._chunks = chunks
        self._buf: Chunk | None = None
        self._pos = 0
        self.next_id = 0
        self.window_s, self.n_windows = window_s, n_windows
        self.done = False
        self._pull()

    def _pull(self) -> None:
        while True:
            nxt = next(self._chunks, None)
            if nxt is None:
                self._buf, self.done = None, True
                return
            if nxt.arrival_s.size:
                self._buf, self._pos = nxt, 0
                return

    @property
    def next_arrival(self) -> float:
        return math.inf if self._buf is None else float(self._buf.arrival_s[self._pos])

    def take(self, t1: float) -> _Pool:
        parts: list[_Pool] = []
        while self._buf is not None and self._buf.arrival_s[self._pos] < t1:
            c = self._buf
            end = self._pos + int(np.searchsorted(c.arrival_s[self._pos :], t1, side="left"))
            n = end - self._pos
            arr = c.arrival_s[self._pos : end]
            parts.append(
                _Pool.arrivals(
                    ids=np.arange(self.next_id, self.next_id + n, dtype=np.int64),
                    arr=arr,
                    inp=c.input_tokens[self._pos : end],
                    out=c.output_tokens[self._pos : end],
                    cached=c.cached_tokens[self._pos : end],
                    win=np.minimum((arr // self.window_s).astype(np.int64), self.n_windows - 1),
                )
            )
            self.next_id += n
            self._pos = end
            if self._pos >= c.arrival_s.size:
                self._pull()
        if not parts:
            return _Pool.empty()
        out = parts[0]
        for part in parts[1:]:
            out = out.cat(part)
        return out


class _Engine:
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
        self.feed = _Feed(source.chunks(), window_s=window_s, n_windows=self.n_windows)
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
        self.draining: list[int] = []  # removed replicas still finishing their requests
        self.rr = 0
        self.admit_due = True
        self.n_active = 0  # live requests in `active` (finished ones are tombstones)
        self.startups: list[float] = []
        # Requests in flight: held by the gateway (no pod serving), queued in a pod,
        # admitted (prefilling or decoding).
        self.gateway = _Pool.empty()
        self.queued = _Pool.empty()
        self.qkey = np.zeros(0, dtype=np.int64)
        self.active = _Pool.empty()
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

    def serving(self, t: float, gate: bool) -> I64:
        ids = self.alive_ids()
        at = self.warm_at if gate else self.ready_at
        out: I64 = ids[at[ids] <= t]
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
        waiting = float(self.queued.id.size + self.gateway.id.size)
        return float(self.n_active), waiting, kv

    # -- requests ---------------------------------------------------------------------

    def _finish(self, win: I64, ttft: F64, tpot: F64, inp: I64, ids: I64) -> None:
        """Record finished (or failed: inf) requests for per-window scoring."""
        excess = ttft - self.slo.ttft_target(inp.astype(np.float64))
        self.fin_buf.append((win, ttft, tpot, excess))
        _add_counts(self.outstanding, win, -1)
        if self.keep:
            self.ttft[ids] = ttft
            self.tpot[ids] = tpot

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
            got = _group_p99(w, values, n)
            has = ~np.isnan(got)
            target[has] = got[has]
        self.w_ok += np.bincount(w, weights=(c <= 0) & (b <= self.slo.tpot_s), minlength=n).astype(
            np.int64
        )
        rest = ~done
        self.fin_buf = [(win[rest], ttft[rest], tpot[rest], excess[rest])] if rest.any() else []

    def _route(self, incoming: _Pool, serving: I64) -> None:
        k = int(incoming.id.size)
        if k == 0:
            return
        if serving.size == 0:
            self.gateway = self.gateway.cat(incoming)
            return
        if serving.size == 1:
            pos = np.zeros(k, dtype=np.int64)
        elif self.routing == "round-robin":
            pos = (self.rr + np.arange(k)) % serving.size
            self.rr = (self.rr + k) % serving.size
        else:
            load = self.running[serving] + self.waiting[serving]
            pos = least_loaded(load, k)
        pods = serving[pos]
        incoming.pod = pods
        self.waiting += np.bincount(pods, minlength=self.waiting.size)
        self._enqueue(incoming)
        self.admit_due = True

    def _enqueue(self, incoming: _Pool) -> None:
        """Insert into the pods' queues, kept as one pool sorted by (pod, request id): each
        pod's queue is a FIFO run, and a long backlog is never re-sorted."""
        key = incoming.pod * _KEY_POD + incoming.id
        if key.size > 1 and np.any(key[1:] < key[:-1]):
            order = np.argsort(key, kind="stable")
            incoming, key = incoming.take(order), key[order]
        if self.queued.size == 0:
            self.queued, self.qkey = incoming, key
            return
        if self.queued.size <= 4 * ADMIT_SCAN:  # short: join and sort (cheaper than insert)
            q, k = self.queued.cat(incoming), np.concatenate((self.qkey, key))
            order = np.argsort(k, kind="stable")
            self.queued, self.qkey = q.take(order), k[order]
            return
        pos = np.searchsorted(self.qkey, key)
        self.queued = self.queued.insert(pos, incoming)
        self.qkey = np.insert(self.qkey, pos, key)

    def _admit(self, t0: float, t1: float) -> F64:
        """Admit from every pod's queue what fits; returns per-pod prefill seconds inside
        this tick (carried-over backlog included)."""
        m = self.n_ids
        pf_tick = np.clip(self.pf_free[:m] - t0, 0.0, self.dt)
        q = self.queued
        if q.id.size == 0 or not self.admit_due:
            return pf_tick
        # Nothing changes the outcome until a request arrives, one finishes or pods change.
        self.admit_due = False
        p = self.p
        pod = q.pod
        if q.size <= ADMIT_SCAN:
            # A short queue: every request is a candidate.
            cand = None
            cpod, reserve = pod, q.reserve
        else:
            # Only the first ADMIT_SCAN requests of each pod's queue are candidates this
            # tick: a long backlog costs O(its length) once, not in every step below.
            starts = np.flatnonzero(_run_starts(pod))
            lengths = np.diff(np.append(starts, pod.size))
            h = np.minimum(lengths, ADMIT_SCAN)
            cand = np.repeat(starts, h) + (np.arange(int(h.sum())) - np.repeat(np.cumsum(h) - h, h))
            cpod, reserve = pod[cand], q.reserve[cand]
        seg = _segment_starts(cpod)
        rank = np.arange(cpod.size) - seg
        cs = np.cumsum(reserve)
        cs_seg = cs - (cs[seg] - reserve[seg])
        free_kv = p.kv_capacity_tokens - self.reserved[cpod]
        free_slots = p.max_batch - self.running[cpod]
        ok_c = (cs_seg <= free_kv) & (rank < free_slots)
        if not ok_c.any():
            return pf_tick
        # A queue longer than the scan may admit more next tick.
        self.admit_due = cand is not None and bool((ok_c & (rank == ADMIT_SCAN - 1)).any())
        adm = np.flatnonzero(ok_c) if cand is None else cand[ok_c]
        if adm.size == q.size:
            a = q
            self.queued, self.qkey = _Pool.empty(), np.zeros(0, dtype=np.int64)
        else:
            a = q.take(adm)
            if q.size <= 4 * ADMIT_SCAN:
                rest = np.ones(q.size, dtype=bool)
                rest[adm] = False
                keep = np.flatnonzero(rest)
                self.queued, self.qkey = q.take(keep), self.qkey[keep]
            else:
                self.queued, self.qkey = q.delete(adm), np.delete(self.qkey, adm)
        distinct = a.size == 1 or int(np.bincount(a.pod).max()) == 1
        apod = a.pod
        at = np.maximum(a.arr, t0)
        cold = at < self.warm_at[apod]
        d = p.prefill_s((a.inp - a.cached).astype(np.float64))
        n_cold = int(np.count_nonzero(cold))
        if n_cold:
            d = d * np.where(cold, p.cold_slowdown, 1.0)
        if distinct:
            start = np.maximum(at, self.pf_free[apod])
            ftt = start + d
            self.pf_free[apod] = ftt
        else:
            # FIFO prefill per pod: ftt_j = max(at_j, ftt_{j-1}) + d_j, a segmented
            # max-plus scan done with per-segment offsets on a cumulative max.
            aseg = _segment_starts(apod)
            dcs = np.cumsum(d)
            big_d = dcs - (dcs[aseg] - d[aseg])  # inclusive cumsum of d within the pod
            x = (at - t0) - big_d + d
            new_run = _run_starts(apod)
            g = np.cumsum(new_run) - 1
            span = float(np.ptp(x)) + 1.0
            mx = np.maximum.accumulate(x + g * span) - g * span
            f0 = self.pf_free[apod] - t0
            ftt = t0 + big_d + np.maximum(f0, mx)
            start = ftt - d
            last = np.append(new_run[1:], True)
            self.pf_free[apod[last]] = ftt[last]
        overlap = np.clip(np.minimum(ftt, t1) - np.maximum(start, t0), 0.0, None)
        if distinct:  # one admission per pod: plain fancy-index updates
            pf_tick[apod] += overlap
            self.waiting[apod] -= 1
            self.running[apod] += 1
            self.reserved[apod] += a.reserve
        else:
            pf_tick += np.bincount(apod, weights=overlap, minlength=m)[:m]
            n_adm = np.bincount(apod, minlength=self.waiting.size)
            self.waiting -= n_adm
            self.running += n_adm
            self.reserved += np.bincount(apod, weights=a.reserve, minlength=self.reserved.size)
        ttft = ftt - a.arr
        self.cold_requests += n_cold
        if self.keep:
            self.cold[a.id] = cold
        self.ev_ttft.append((float(ftt.max()), ftt.copy(), ttft))
        a.cold = cold
        a.ftt = ftt
        a.rem = (a.out - 1).astype(np.float64)
        self.active = self.active.cat(a)
        self.n_active += a.id.size
        return pf_tick

    def step(self, gate: bool) -> None:
        t0 = self.tick * self.dt
        t1 = t0 + self.dt
        p = self.p
        serving = self.serving(t0, gate)
        incoming = self.feed.take(t1)
        if incoming.id.size:
            _add_counts(self.arrived, incoming.win)
            _add_counts(self.outstanding, incoming.win)
            too_long = incoming.inp + incoming.out > p.kv_capacity_tokens
            if too_long.any():
                bad = incoming.take(np.flatnonzero(too_long))
                inf = np.full(bad.id.size, np.inf)
                self.rejected += int(bad.id.size)
                self._finish(bad.win, inf, inf, bad.inp, bad.id)
                incoming = incoming.take(np.flatnonzero(~too_long))
        if self.gateway.id.size and serving.size:
            incoming = self.gateway.cat(incoming)
            self.gateway = _Pool.empty()
        self._route(incoming, serving)
        pf_tick = self._admit(t0, t1)
        tokens = 0.0
        a = self.active
        if a.id.size:
            m = self.n_ids
            rids, ftt, before = a.pod, a.ftt, a.rem
            decoding = ftt < t1
            left = np.maximum(before, 0.0)
            ctx = a.reserve - 1.0 - left
            batch = np.bincount(rids, weights=decoding, minlength=m)
            context = np.bincount(rids, weights=np.where(decoding, ctx, 0.0), minlength=m)
            busy = pf_tick[:m] * (1.0 / self.dt)
            share = np.maximum(1.0 - busy, p.min_decode_share)
            slow = np.where(self.warm_at[:m] > t0, p.cold_slowdown, 1.0) / share
            itl = (
                p.itl_alpha_s + p.itl_beta_s * batch + p.itl_per_context_token_s * context
            ) * slow
            req_itl = itl[rids]
            tau = t1 - np.maximum(t0, ftt)
            gen = np.where(decoding, tau, 0.0) / req_itl
            after = before - gen
            first = decoding & (ftt >= t0)
            tokens = float(np.minimum(gen, left).sum())
            tokens += float(np.count_nonzero(first))
            self.cum_in += float(a.inp[first].sum())
            done = decoding & (after <= 0.0)
            if done.any():
                self.admit_due = True
                di = np.flatnonzero(done)
                fin = np.maximum(t1 + after[di] * req_itl[di], ftt[di])
                outs = a.out[di]
                per_token = (fin - ftt[di]) / np.maximum(outs - 1, 1)
                tpot = np.where(outs > 1, per_token, 0.0)
                self.ev_tpot.append((float(fin.max()), fin, tpot))
                self._finish(a.win[di], ftt[di] - a.arr[di], tpot, a.inp[di], a.id[di])
                dp = rids[di]
                self.running[:m] -= np.bincount(dp, minlength=m)
                self.reserved[:m] -= np.bincount(dp, weights=a.reserve[di], minlength=m)
                # Finished requests become tombstones (never decoding, no context) until
                # the pool is compacted: cheaper than compacting every tick.
                after[di] = 0.0
                a.rem = after
                a.ftt[di] = np.inf
                a.reserve[di] = 1.0
                self.n_active -= di.size
                if a.id.size > 2 * self.n_active + 64:
                    self.active = a.take(np.flatnonzero(np.isfinite(a.ftt)))
                if self.draining:
                    self.draining = [r for r in self.draining if self.running[r] > 0]
            else:
                a.rem = after
        self.cum_out += tokens
        self.conc[self.tick % self.conc.size] = (
            self.n_active + self.queued.id.size + self.gateway.id.size
        )
        self.tick += 1

    def idle(self) -> bool:
        return (
            self.feed.done
            and self.n_active == 0
            and self.queued.id.size == 0
            and self.gateway.id.size == 0
        )

    def abandon(self) -> None:
        """Requests still in flight when the replay stops never finish: SLO misses."""
        live = self.active.take(np.flatnonzero(np.isfinite(self.active.ftt)))
        for pool in (self.gateway, self.queued, live):
            if pool.id.size:
                inf = np.full(pool.id.size, np.inf)
                self._finish(pool.win, inf, inf, pool.inp, pool.id)
        while not self.feed.done:
            rest = self.feed.take(math.inf)
            _add_counts(self.arrived, rest.win)
            _add_counts(self.outstanding, rest.win)
            inf = np.full(rest.id.size, np.inf)
            self._finish(rest.win, inf, inf, rest.inp, rest.id)

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
    e = _Engine(
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
    )
