"""The request flow of one tick: the gateway routes arrivals to pods' queues, each pod
admits what fits its KV cache and batch, prefills FIFO and decodes its batch (see
engine.py's docstring for the order). Split out of engine.py; behaviour unchanged."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from modelscale.simulate.pool import (
    F64,
    I64,
    Pool,
    add_counts,
    least_loaded,
    run_starts,
    segment_starts,
)
from modelscale.simulate.state import EngineState

ADMIT_SCAN = 32  # queued requests per pod considered for admission in one tick
# Queues up to this long are admitted by `_admit_few` in plain Python floats: on a few
# requests, NumPy's per-call cost is most of a tick. Both paths do the same float
# operations in the same order, so the results are bit-identical.
FEW = 12
# np.bincount's result: its stub says integer; with weights it is float64.
_Counts = NDArray[np.number[Any]]
_KEY_POD = 1 << 34  # sort key of a queued request: pod * _KEY_POD + request id
_KEY_PRIO = 1 << 30  # ... + class * _KEY_PRIO under an ordered serving policy (ids < 2^30)


class Engine(EngineState):
    """The replay: `EngineState` driven one tick at a time by `step`."""

    few = FEW  # queues up to this long take `_admit_few` (0: always the vectorised path)

    def _route(self, incoming: Pool, serving: I64) -> None:
        k = incoming.size
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
        if self.queue_limit is not None:
            incoming = self._over_limit(incoming)
            pods = incoming.pod
        self.waiting += np.bincount(pods, minlength=self.waiting.size)
        self._enqueue(incoming)
        self.admit_due = True

    def _over_limit(self, incoming: Pool) -> Pool:
        """Shed the arrivals that find `max_queue` requests of their class already waiting
        in their pod; returns the rest."""
        assert self.queue_limit is not None
        n_cls = self.queue_limit.size
        q = self.queued
        have = np.bincount(q.pod * n_cls + q.prio, minlength=self.n_ids * n_cls)
        group = incoming.pod * n_cls + incoming.prio
        order = np.argsort(group, kind="stable")  # arrival order within (pod, class)
        sorted_group = group[order]
        rank = np.empty(group.size, dtype=np.int64)
        rank[order] = np.arange(group.size) - segment_starts(sorted_group)
        full = have[group] + rank >= self.queue_limit[incoming.prio]
        if not full.any():
            return incoming
        self.shed(incoming.take(np.flatnonzero(full)), self.tick * self.dt, timeout=False)
        return incoming.take(np.flatnonzero(~full))

    def _expire(self, now: float) -> None:
        """Shed the requests that have waited their class's timeout without admission,
        from the pods' queues and the gateway."""
        assert self.queue_timeout is not None
        q = self.queued
        if q.size:
            late = now - q.arr >= self.queue_timeout[q.prio]
            if late.any():
                gone = np.flatnonzero(late)
                out = q.take(gone)
                self.waiting -= np.bincount(out.pod, minlength=self.waiting.size)
                keep = np.flatnonzero(~late)
                self.queued, self.qkey = q.take(keep), self.qkey[keep]
                self.shed(out, now, timeout=True)
                self.admit_due = True
        g = self.gateway
        if g.size:
            late = now - g.arr >= self.queue_timeout[g.prio]
            if late.any():
                self.shed(g.take(np.flatnonzero(late)), now, timeout=True)
                self.gateway = g.take(np.flatnonzero(~late))

    def _enqueue(self, incoming: Pool) -> None:
        """Insert into the pods' queues, kept as one pool sorted by (pod, request id): each
        pod's queue is a FIFO run, and a long backlog is never re-sorted."""
        key = incoming.pod * _KEY_POD + incoming.id
        if self.serving is not None and self.serving.ordered:
            key = key + incoming.prio * _KEY_PRIO  # class first, then arrival, per pod
        if key.size > 1 and (
            any(b < a for a, b in itertools.pairwise(key.tolist()))
            if key.size <= 8
            else bool(np.any(key[1:] < key[:-1]))
        ):
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
        # np.clip's wrapper costs more than the two ufuncs on a few pods (same values).
        pf_tick = np.minimum(np.maximum(self.pf_free[:m] - t0, 0.0), self.dt)
        q = self.queued
        if q.size == 0 or not self.admit_due:
            return pf_tick
        # Nothing changes the outcome until a request arrives, one finishes or pods change.
        self.admit_due = False
        if q.size <= self.few:
            return self._admit_few(q, t0, t1, pf_tick)
        p = self.p
        pod = q.pod
        if q.size <= ADMIT_SCAN:
            # A short queue: every request is a candidate.
            cand = None
            cpod, reserve = pod, q.reserve
        else:
            # Only the first ADMIT_SCAN requests of each pod's queue are candidates this
            # tick: a long backlog costs O(its length) once, not in every step below.
            starts = np.flatnonzero(run_starts(pod))
            lengths = np.diff(np.append(starts, pod.size))
            h = np.minimum(lengths, ADMIT_SCAN)
            cand = np.repeat(starts, h) + (np.arange(int(h.sum())) - np.repeat(np.cumsum(h) - h, h))
            cpod, reserve = pod[cand], q.reserve[cand]
        seg = segment_starts(cpod)
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
            self.queued, self.qkey = Pool.empty(), np.zeros(0, dtype=np.int64)
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
            aseg = segment_starts(apod)
            dcs = np.cumsum(d)
            big_d = dcs - (dcs[aseg] - d[aseg])  # inclusive cumsum of d within the pod
            x = (at - t0) - big_d + d
            new_run = run_starts(apod)
            g = np.cumsum(new_run) - 1
            span = float(np.ptp(x)) + 1.0
            mx = np.maximum.accumulate(x + g * span) - g * span
            f0 = self.pf_free[apod] - t0
            ftt = t0 + big_d + np.maximum(f0, mx)
            start = ftt - d
            last = np.append(new_run[1:], True)
            self.pf_free[apod[last]] = ftt[last]
        overlap = np.maximum(np.minimum(ftt, t1) - np.maximum(start, t0), 0.0)
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
        self.ev_ttft.append((float(ftt.max()), ftt, ttft))
        self.active.append(a, ftt=ftt, rem=(a.out - 1).astype(np.float64))
        self.n_active += a.size
        return pf_tick

    def _admit_few(self, q: Pool, t0: float, t1: float, pf_tick: F64) -> F64:
        """`_admit` for a short queue (every request a candidate), one request at a time in
        Python floats: each value is computed by the same operations, in the same order, as
        the vectorised path (a global cumulative sum less its value at the pod's first
        request, the same offsets in the max-plus scan), so the two agree to the bit."""
        p = self.p
        pods, reserve = q.pod.tolist(), q.reserve.tolist()
        adm: list[int] = []
        cs = base = free_kv = 0.0
        prev = rank = free_slots = -1
        for j, (pd, r) in enumerate(zip(pods, reserve, strict=True)):
            cs += r
            if pd != prev:
                prev, rank, base = pd, 0, cs - r
                free_kv = p.kv_capacity_tokens - float(self.reserved[pd])
                free_slots = p.max_batch - int(self.running[pd])
            else:
                rank += 1
            if cs - base <= free_kv and rank < free_slots:
                adm.append(j)
        if not adm:
            return pf_tick
        if len(adm) == q.size:
            a = q
            self.queued, self.qkey = Pool.empty(), np.zeros(0, dtype=np.int64)
        else:
            a = q.take(np.array(adm))
            rest = np.ones(q.size, dtype=bool)
            rest[adm] = False
            keep = np.flatnonzero(rest)
            self.queued, self.qkey = q.take(keep), self.qkey[keep]
        apod = [pods[j] for j in adm]
        arr = a.arr.tolist()
        tokens = (a.inp - a.cached).tolist()
        at = [max(x, t0) for x in arr]
        cold = [x < float(self.warm_at[pd]) for x, pd in zip(at, apod, strict=True)]
        d = [float(n) / p.prefill_tokens_per_s + p.prefill_quadratic_s * n * n for n in tokens]
        n_cold = sum(cold)
        if n_cold:
            d = [x * (p.cold_slowdown if c else 1.0) for x, c in zip(d, cold, strict=True)]
        k = len(adm)
        ftt = [0.0] * k
        start = [0.0] * k
        if len(set(apod)) == k:  # one admission per pod
            for j, pd in enumerate(apod):
                start[j] = max(at[j], float(self.pf_free[pd]))
                ftt[j] = start[j] + d[j]
                self.pf_free[pd] = ftt[j]
        else:
            # The vectorised path's segmented max-plus scan, term by term.
            big_d, x, g = [0.0] * k, [0.0] * k, [0] * k
            dcs = seg_base = 0.0
            run = -1
            for j in range(k):
                dcs += d[j]
                if j == 0 or apod[j] != apod[j - 1]:
                    run += 1
                    seg_base = dcs - d[j]
                big_d[j] = dcs - seg_base
                x[j] = (at[j] - t0) - big_d[j] + d[j]
                g[j] = run
            span = (max(x) - min(x)) + 1.0
            mx = -math.inf
            for j in range(k):
                off = g[j] * span
                y = x[j] + off
                mx = y if y > mx or j == 0 else mx
                f0 = float(self.pf_free[apod[j]]) - t0
                ftt[j] = t0 + big_d[j] + max(f0, mx - off)
                start[j] = ftt[j] - d[j]
                if j == k - 1 or apod[j + 1] != apod[j]:
                    self.pf_free[apod[j]] = ftt[j]
        prefill = dict.fromkeys(apod, 0.0)
        held = dict.fromkeys(apod, 0.0)
        for j, pd in enumerate(apod):
            prefill[pd] += max(min(ftt[j], t1) - max(start[j], t0), 0.0)
            held[pd] += reserve[adm[j]]
        for pd, busy in prefill.items():
            pf_tick[pd] += busy
            self.reserved[pd] += held[pd]
        for pd in apod:
            self.waiting[pd] -= 1
            self.running[pd] += 1
        ftt_a = np.array(ftt)
        ttft = ftt_a - a.arr
        self.cold_requests += n_cold
        if self.keep:
            self.cold[a.id] = cold
        self.ev_ttft.append((max(ftt), ftt_a, ttft))
        self.active.append(a, ftt=ftt_a, rem=(a.out - 1).astype(np.float64))
        self.n_active += k
        return pf_tick

    def _itl(self, batch: _Counts, context: _Counts, pf_tick: F64, t0: float) -> F64:
        """Seconds per decode step of each pod this tick: ITL(batch, context), slowed by its
        prefill share and while cold. On a few pods in Python floats (the same operations
        in the same order as the vectorised form)."""
        p = self.p
        m = batch.size
        if m <= self.few:
            inv_dt, floor = 1.0 / self.dt, p.min_decode_share
            alpha, beta, gamma = p.itl_alpha_s, p.itl_beta_s, p.itl_per_context_token_s
            out = []
            for b, c, pf, warm in zip(
                batch.tolist(),
                context.tolist(),
                pf_tick[:m].tolist(),
                self.warm_at[:m].tolist(),
                strict=True,
            ):
                share = max(1.0 - pf * inv_dt, floor)
                slow = (p.cold_slowdown if warm > t0 else 1.0) / share
                out.append((alpha + beta * b + gamma * c) * slow)
            return np.array(out)
        busy = pf_tick[:m] * (1.0 / self.dt)
        share = np.maximum(1.0 - busy, p.min_decode_share)
        slow = np.where(self.warm_at[:m] > t0, p.cold_slowdown, 1.0) / share
        itl: F64 = (
            p.itl_alpha_s + p.itl_beta_s * batch + p.itl_per_context_token_s * context
        ) * slow
        return itl

    def _complete_few(self, di: I64, req_itl: F64, t1: float) -> None:
        """Record the few requests at `di` of the active set that finished decoding this
        tick (their remaining tokens went to <= 0), in Python floats: the same operations
        in the same order as the vectorised block of `step`."""
        done = self.active.take(di)
        fin: list[float] = []
        tpot: list[float] = []
        freed: dict[int, float] = {}
        rows = zip(
            self.active.rem[di].tolist(),
            req_itl[di].tolist(),
            self.active.ftt[di].tolist(),
            done.out.tolist(),
            done.pod.tolist(),
            done.reserve.tolist(),
            strict=True,
        )
        for after, itl, ftt, out, pod, reserve in rows:
            end = max(t1 + after * itl, ftt)
            fin.append(end)
            tpot.append((end - ftt) / max(out - 1, 1) if out > 1 else 0.0)
            freed[pod] = freed.get(pod, 0.0) + reserve
            self.running[pod] -= 1
        for pod, reserve in freed.items():
            self.reserved[pod] -= reserve
        fin_a, tpot_a = np.array(fin), np.array(tpot)
        self.ev_tpot.append((max(fin), fin_a, tpot_a))
        self._finish(done, self.active.ftt[di] - done.arr, tpot_a)

    def step(self, gate: bool) -> None:
        t0 = self.tick * self.dt
        t1 = t0 + self.dt
        p = self.p
        serving = self.serving_ids(t0, gate)
        if self.queue_timeout is not None:
            self._expire(t0)
        incoming = self.feed.take(t1)
        if incoming.size:
            add_counts(self.arrived, incoming.win)
            add_counts(self.outstanding, incoming.win)
            if self.feed.has_long:  # some context exceeds the KV cache: refuse those
                too_long = incoming.inp + incoming.out > p.kv_capacity_tokens
                bad = incoming.take(np.flatnonzero(too_long))
                inf = np.full(bad.size, np.inf)
                self.rejected += bad.size
                self._finish(bad, inf, inf)
                incoming = incoming.take(np.flatnonzero(~too_long))
        if self.gateway.size and serving.size:
            incoming = self.gateway.cat(incoming)
            self.gateway = Pool.empty()
        self._route(incoming, serving)
        pf_tick = self._admit(t0, t1)
        tokens = 0.0
        a = self.active
        if a.n:
            m = self.n_ids
            rids, ftt, before = a.pod, a.ftt, a.rem
            decoding = ftt < t1
            left = np.maximum(before, 0.0)
            ctx = a.reserve - 1.0 - left
            batch = np.bincount(rids, weights=decoding, minlength=m)
            context = np.bincount(rids, weights=np.where(decoding, ctx, 0.0), minlength=m)
            req_itl = self._itl(batch, context, pf_tick, t0)[rids]
            tau = t1 - np.maximum(t0, ftt)
            gen = np.where(decoding, tau, 0.0) / req_itl
            after = np.subtract(before, gen, out=before)  # `before` is not read again
            first = decoding & (ftt >= t0)
            tokens = float(np.minimum(gen, left).sum())
            tokens += float(np.count_nonzero(first))
            self.cum_in += float(a.inp[first].sum())
            di = np.flatnonzero(decoding & (after <= 0.0))
            if di.size:
                self.admit_due = True
                if di.size <= self.few:
                    self._complete_few(di, req_itl, t1)
                else:
                    ftt_d = ftt[di]
                    fin = np.maximum(t1 + after[di] * req_itl[di], ftt_d)
                    outs = a.out[di]
                    per_token = (fin - ftt_d) / np.maximum(outs - 1, 1)
                    tpot = np.where(outs > 1, per_token, 0.0)
                    self.ev_tpot.append((float(fin.max()), fin, tpot))
                    self._finish(a.take(di), ftt_d - a.arr[di], tpot)
                    dp = rids[di]
                    self.running[:m] -= np.bincount(dp, minlength=m)
                    self.reserved[:m] -= np.bincount(dp, weights=a.reserve[di], minlength=m)
                # Finished requests become tombstones (never decoding, no context) until
                # the pool is compacted: cheaper than compacting every tick.
                after[di] = 0.0
                ftt[di] = np.inf
                a.reserve[di] = 1.0
                self.n_active -= di.size
                if a.n > 2 * self.n_active + 64:
                    a.compact()
                if self.draining:
                    self.draining = [r for r in self.draining if self.running[r] > 0]
        self.cum_out += tokens
        self.conc[self.tick % self.conc.size] = self.n_active + self.queued.size + self.gateway.size
        self.tick += 1

    def idle(self) -> bool:
        return (
            self.feed.done
            and self.n_active == 0
            and self.queued.size == 0
            and self.gateway.size == 0
        )

    def abandon(self) -> None:
        """Requests still in flight when the replay stops never finish: SLO misses."""
        live = self.active.take(np.flatnonzero(np.isfinite(self.active.ftt)))
        for pool in (self.gateway, self.queued, live):
            if pool.size:
                inf = np.full(pool.size, np.inf)
                self._finish(pool, inf, inf)
        while not self.feed.done:
            rest = self.feed.take(math.inf)
            add_counts(self.arrived, rest.win)
            add_counts(self.outstanding, rest.win)
            inf = np.full(rest.size, np.inf)
            self._finish(rest, inf, inf)
