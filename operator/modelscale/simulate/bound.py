"""What no policy can beat: SLO feasibility, a lower bound on replica-seconds, and the
fluid replica counts the oracle and every policy's start are derived from.

The lower bound is a proof, not an estimate (docs/benchmarks.md, "The lower bound", states
it in full). Per 1-minute window w and per request i that arrived in it, with its TTFT
target T_i and the TPOT target tau:

* its prefill takes at least p_i = input_i / prefill rate (warm; cold is slower), one
  replica's prefills run one at a time, it cannot start before the request arrives (inside
  w), and when TTFT is met it ends by a_i + T_i; so at least max(0, p_i - (a_i + T_i - w_end))
  of it runs inside w;
* its out_i - 1 decode tokens come at most one per ITL(1) s (a batch holds the request
  itself), end by a_i + T_i + tau (out_i - 1) when TTFT and TPOT are met, and cannot start
  before the request arrives; so at least out_i - 1 - max(0, that end - w_end) / ITL(1) of
  them are produced inside w;
* a replica in one second prefills for at most one second, decodes at most
  D = B / ITL(B) tokens (B = max batch), and prefill and decode together obey
  decode / D + (1 - m) prefill <= 1 (decode slows to max(1 - u, m) of its rate while a
  share u of the second prefills; m = min_decode_share); every replica that exists is
  counted, and there is always at least one.

Across windows: a met request's prefill ends by a_i + T_i and its decode by
a_i + T_i + tau (out_i - 1), wherever it started, so by the end of each window the
replica-seconds spent so far cover all the work whose deadline has passed (a prefix
constraint per window end; the greedy that tops up the latest window is optimal for it).

A window that meets its P99 targets lets at most k = `figures.allowed_misses(n)` of its n
requests miss TTFT (and k miss TPOT): the bound drops the k largest prefill amounts and
the 2k largest decode amounts. The windows are disjoint, so the replica-seconds of a run
are at least the sum of every window's need, and a policy at the 99 % target may fail
`figures.allowed_failed_windows(scored)` scored windows: failing one lowers the optimum
by at most its own need above one replica plus its requests' work, and the bound takes
off the largest such amounts. Unscored windows (< 20 requests) need only the one replica,
and their requests none of the work.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from modelscale.simulate import figures
from modelscale.simulate.replica import ReplicaParams, Slo, sustainable_request_rate
from modelscale.simulate.trace import Trace

WINDOW_S = figures.WINDOW_S


class InfeasibleCapacityError(ValueError):
    """One replica cannot serve the trace's mean request within the SLO."""


@dataclass(frozen=True)
class Feasibility:
    """Whether the SLO can be met at any capacity: the requests whose own prefill on an
    idle warm replica exceeds their TTFT target (or whose single-stream decode exceeds the
    TPOT target) make a window unattainable once they are more than its P99 allows."""

    feasible: bool
    windows_scored: int
    windows_unattainable: int
    windows_allowed_to_fail: int
    reason: str  # "" when feasible
    unattainable: NDArray[np.bool_]


@dataclass(frozen=True)
class LowerBound:
    replica_seconds: float
    need_s: NDArray[np.float64]  # replica-seconds each window needs when it meets the SLO
    windows_left_out: int  # scored windows the bound lets fail (the 1 %)


def window_lengths(duration_s: float) -> NDArray[np.float64]:
    n = figures.window_count(duration_s)
    starts = np.arange(n) * WINDOW_S
    lengths: NDArray[np.float64] = np.minimum(starts + WINDOW_S, duration_s) - starts
    return lengths


def min_prefill_s(params: ReplicaParams, input_tokens: NDArray[np.int64]) -> NDArray[np.float64]:
    """The least time a prompt's prefill takes: linear cost at a warm replica."""
    out: NDArray[np.float64] = input_tokens.astype(np.float64) / params.prefill_tokens_per_s
    return out


def max_decode_tokens_per_s(params: ReplicaParams) -> float:
    """The most output tokens/s one replica decodes: a full batch at its ITL."""
    return params.max_batch / params.itl(params.max_batch)


def feasibility(trace: Trace, *, params: ReplicaParams, slo: Slo) -> Feasibility:
    idx = figures.window_index(trace)
    n = figures.window_count(trace.duration_s)
    counts = np.bincount(idx, minlength=n)
    scored = counts >= figures.MIN_REQUESTS
    late_ttft = min_prefill_s(params, trace.input_tokens) > figures.ttft_targets(
        slo, trace.input_tokens
    )
    late_tpot = (trace.output_tokens > 1) & (params.itl(1) > slo.tpot_s)
    bad_ttft = np.bincount(idx, weights=late_ttft, minlength=n)
    bad_tpot = np.bincount(idx, weights=late_tpot, minlength=n)
    allowed = np.array([figures.allowed_misses(int(c)) for c in counts])
    unattainable = scored & ((bad_ttft > allowed) | (bad_tpot > allowed))
    n_scored = int(scored.sum())
    may_fail = figures.allowed_failed_windows(n_scored)
    n_bad = int(unattainable.sum())
    reason = ""
    if n_scored == 0:
        reason = (
            f"no 1-minute window has {figures.MIN_REQUESTS} or more requests: nothing to "
            "score; replay a longer or busier slice"
        )
    elif n_bad > may_fail:
        worst = float(np.max(min_prefill_s(params, trace.input_tokens)))
        reason = (
            f"the SLO cannot be met at any replica count in {n_bad} of {n_scored} scored "
            f"windows (at most {may_fail} may fail): "
            + (
                f"single-stream ITL {params.itl(1):.3f} s exceeds TPOT target {slo.tpot_s:g} s"
                if params.itl(1) > slo.tpot_s
                else f"prompts' own prefill (up to {worst:.1f} s) exceeds their TTFT target; "
                "raise --slo-ttft or --slo-ttft-per-1k"
            )
        )
    return Feasibility(
        feasible=reason == "",
        windows_scored=n_scored,
        windows_unattainable=n_bad,
        windows_allowed_to_fail=may_fail,
        reason=reason,
        unattainable=unattainable,
    )


def _sum_smallest(values: NDArray[np.float64], drop: int) -> float:
    if drop <= 0:
        return float(values.sum())
    if drop >= values.size:
        return 0.0
    return float(np.sort(values)[: values.size - drop].sum())


def _in_interval_work(
    trace: Trace, *, params: ReplicaParams, slo: Slo, end_s: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per request: the prefill seconds and decode tokens it must get before `end_s` (the
    end of the interval it arrived in) when it meets its TTFT and TPOT targets."""
    arrival = trace.arrival_s
    target = figures.ttft_targets(slo, trace.input_tokens)
    prefill = np.maximum(
        0.0, min_prefill_s(params, trace.input_tokens) - np.maximum(0.0, arrival + target - end_s)
    )
    decode_tokens = (trace.output_tokens - 1).astype(np.float64)
    last = arrival + target + slo.tpot_s * decode_tokens
    decode = np.maximum(0.0, decode_tokens - np.maximum(0.0, last - end_s) / params.itl(1))
    return prefill, decode


def _need(p: float, d: float, length: float, params: ReplicaParams) -> float:
    """Replica-seconds an interval needs for p prefill seconds and d decode seconds (at
    the full-batch rate) of work, with at least one replica throughout. A replica that
    prefills a share u of a second decodes at most max(1 - u, m) of its full rate, and
    max(1 - u, m) <= 1 - (1 - m) u (the chord of a convex function), so per replica-second
    decode + (1 - m) prefill <= 1."""
    return max(length, p, d, d + (1.0 - params.min_decode_share) * p)


def lower_bound(
    trace: Trace,
    *,
    params: ReplicaParams,
    slo: Slo,
    sub_intervals_s: tuple[float, ...] = (15.0, 5.0),
) -> LowerBound:
    """A lower bound on the replica-seconds of any run of `trace` that meets the SLO in at
    least `figures.TARGET_WINDOWS` of its scored windows (proof: module docstring). Each
    window's need is the larger of two bounds: the window as one interval, and the sum
    over its sub-intervals of `sub_intervals_s` (which sees bursts inside the minute),
    less the work of the 2k requests that may miss a target."""
    n = figures.window_count(trace.duration_s)
    lengths = window_lengths(trace.duration_s)
    idx = figures.window_index(trace)
    bounds = np.searchsorted(idx, np.arange(n + 1))
    d_max = max_decode_tokens_per_s(params)
    ends = np.minimum((idx + 1) * WINDOW_S, trace.duration_s)
    prefill, decode = _in_interval_work(trace, params=params, slo=slo, end_s=ends)
    need = lengths.copy()
    scored = np.zeros(n, dtype=bool)
    for w in range(n):
        a, b = bounds[w], bounds[w + 1]
        if b - a < figures.MIN_REQUESTS:
            continue
        scored[w] = True
        k = figures.allowed_misses(int(b - a))
        p = _sum_smallest(prefill[a:b], k)
        d = _sum_smallest(decode[a:b], 2 * k) / d_max
        need[w] = _need(p, d, lengths[w], params)
    for sub in sub_intervals_s:
        # Each request's work inside its own sub-interval; sub-intervals are disjoint, so
        # their needs add up. Dropping a request lowers an interval's need by at most its
        # prefill + decode work, so the 2k largest of those are taken off.
        sub_idx = np.floor(trace.arrival_s / sub).astype(np.int64)
        sub_end = np.minimum(
            np.minimum((sub_idx + 1) * sub, (idx + 1) * WINDOW_S), trace.duration_s
        )
        sp, sd = _in_interval_work(trace, params=params, slo=slo, end_s=sub_end)
        sd = sd / d_max
        for w in np.flatnonzero(scored):
            a, b = bounds[w], bounds[w + 1]
            w0, w1 = w * WINDOW_S, w * WINDOW_S + lengths[w]
            edges = np.arange(w0, w1 + 1e-9, sub)
            if edges[-1] < w1 - 1e-9:
                edges = np.append(edges, w1)
            lens = np.diff(edges)
            local = np.minimum(
                np.searchsorted(edges, trace.arrival_s[a:b], side="right") - 1, lens.size - 1
            )
            ps = np.bincount(local, weights=sp[a:b], minlength=lens.size)
            ds = np.bincount(local, weights=sd[a:b], minlength=lens.size)
            total = sum(
                _need(float(x), float(y), float(z), params)
                for x, y, z in zip(ps, ds, lens, strict=True)
            )
            k = figures.allowed_misses(int(b - a))
            drop = float(np.sort(sp[a:b] + sd[a:b])[::-1][: 2 * k].sum()) if k else 0.0
            need[w] = max(need[w], total - drop)
    # Deadlines across windows: all the work whose deadline falls by the end of window w
    # was done by then, so the replica-seconds of windows 0..w cover it (work spilling
    # out of its own window is counted where it must end at the latest).
    m = params.min_decode_share
    p_all = min_prefill_s(params, trace.input_tokens)
    d_all = (trace.output_tokens - 1).astype(np.float64) / d_max
    target = figures.ttft_targets(slo, trace.input_tokens)
    p_due = trace.arrival_s + target
    d_due = p_due + slo.tpot_s * (trace.output_tokens - 1)
    counted = scored[idx]  # unscored windows' requests need not be served at all
    w_ends = np.minimum(np.arange(1, n + 1) * WINDOW_S, trace.duration_s)
    drops = np.zeros((3, n))
    for w in np.flatnonzero(scored):
        a, b = bounds[w], bounds[w + 1]
        k = figures.allowed_misses(int(b - a))
        if k:
            drops[0, w] = np.sort(p_all[a:b])[::-1][:k].sum()
            drops[1, w] = np.sort(d_all[a:b])[::-1][: 2 * k].sum()
            drops[2, w] = np.sort((1.0 - m) * p_all[a:b] + d_all[a:b])[::-1][: 2 * k].sum()
    prefix = np.zeros(n)
    for row, (due, amount) in enumerate(
        (
            ((p_due,), (p_all,)),
            ((d_due,), (d_all,)),
            ((p_due, d_due), ((1.0 - m) * p_all, d_all)),
        )
    ):
        done_by = np.zeros(n)
        for dd, am in zip(due, amount, strict=True):
            slot = np.searchsorted(w_ends, dd, side="left")  # first window end >= deadline
            ok = counted & (slot < n)
            done_by += np.bincount(slot[ok], weights=am[ok], minlength=n)
        prefix = np.maximum(prefix, np.cumsum(done_by) - np.cumsum(drops[row]))
    y = need.copy()
    running = 0.0
    for w in range(n):
        running += y[w]
        if running < prefix[w]:
            y[w] += prefix[w] - running
            running = prefix[w]
    # A window the policy fails takes away its own need and at most its requests' work.
    own_work = np.bincount(idx, weights=np.where(counted, p_all + d_all, 0.0), minlength=n)
    extra = np.where(scored, y - lengths + own_work, 0.0)
    left_out = min(figures.allowed_failed_windows(int(scored.sum())), int(scored.sum()))
    dropped = float(np.sort(extra)[::-1][:left_out].sum()) if left_out else 0.0
    total = max(float(lengths.sum()), float(y.sum()) - dropped)
    return LowerBound(replica_seconds=total, need_s=y, windows_left_out=left_out)


def trailing_fluid_load(
    trace: Trace,
    *,
    params: ReplicaParams,
    slo: Slo,
    times: NDArray[np.float64],
    window_s: float = 60.0,
) -> NDArray[np.float64]:
    """At each of `times`, the warm replicas the fluid model says the requests that arrived
    in (t - window_s, t] need, unrounded: their rate over what one warm replica sustains
    at their mean prompt and answer (as `fluid_replicas` per window). Only requests that
    have arrived by t count: it reads the present exactly and nothing after it. 0 where
    none arrived, or where one replica cannot serve their mean request at all."""
    if window_s <= 0:
        raise ValueError(f"window_s must be > 0, got {window_s}")
    a = trace.arrival_s
    lo = np.searchsorted(a, times - window_s, side="right")
    hi = np.searchsorted(a, times, side="right")
    cum_in = np.concatenate(([0.0], np.cumsum(trace.input_tokens, dtype=np.float64)))
    cum_out = np.concatenate(([0.0], np.cumsum(trace.output_tokens, dtype=np.float64)))
    load = np.zeros(times.size, dtype=np.float64)
    for i, t in enumerate(times):
        n = int(hi[i] - lo[i])
        span = min(window_s, float(t))
        if n == 0 or span <= 0:
            continue
        per_replica = sustainable_request_rate(
            params,
            mean_input=(cum_in[hi[i]] - cum_in[lo[i]]) / n,
            mean_output=(cum_out[hi[i]] - cum_out[lo[i]]) / n,
            slo=slo,
            max_prefill_share=0.9,
        )
        if per_replica > 1e-6:
            load[i] = n / span / per_replica
    return load


def fluid_replicas(
    trace: Trace, *, params: ReplicaParams, slo: Slo, max_replicas: int
) -> NDArray[np.int64]:
    """Per window, the replicas the fluid model says it needs: its request rate over
    what one warm replica sustains with that window's mean prompt and answer (at least 1,
    at most `max_replicas`; 1 where one replica cannot serve its mean request at all:
    no replica count serves such a window, and `feasibility` reports it)."""
    n = figures.window_count(trace.duration_s)
    idx = figures.window_index(trace)
    counts = np.bincount(idx, minlength=n).astype(np.float64)
    ins = np.bincount(idx, weights=trace.input_tokens, minlength=n)
    outs = np.bincount(idx, weights=trace.output_tokens, minlength=n)
    lengths = window_lengths(trace.duration_s)
    need = np.ones(n, dtype=np.int64)
    for w in range(n):
        if counts[w] == 0:
            continue
        per_replica = sustainable_request_rate(
            params,
            mean_input=ins[w] / counts[w],
            mean_output=outs[w] / counts[w],
            slo=slo,
            max_prefill_share=0.9,
        )
        if per_replica <= 1e-6:
            continue
        rate = counts[w] / lengths[w]
        need[w] = min(max_replicas, max(1, math.ceil(rate / per_replica)))
    return need


def initial_replicas(trace: Trace, *, params: ReplicaParams, slo: Slo, max_replicas: int) -> int:
    """What the trace's first minute needs by the fluid rate (a floor on where every
    policy starts; never the oracle's count, which knows the future). Refuses when one
    replica cannot serve the mean request."""
    if trace.requests == 0:
        return 1
    mean_in = float(trace.input_tokens.mean())
    mean_out = float(trace.output_tokens.mean())
    if sustainable_request_rate(params, mean_input=mean_in, mean_output=mean_out, slo=slo) <= 1e-6:
        raise InfeasibleCapacityError(
            f"one replica cannot serve the mean request ({mean_in:,.0f} prompt tokens, "
            f"{mean_out:,.0f} output tokens) within P99 TTFT {slo.ttft_target(mean_in):g} s / "
            f"TPOT {slo.tpot_s:g} s; raise --slo-ttft, --slo-ttft-per-1k or --slo-tpot"
        )
    return int(fluid_replicas(trace, params=params, slo=slo, max_replicas=max_replicas)[0])
