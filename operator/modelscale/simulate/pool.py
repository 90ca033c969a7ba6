"""Requests in flight as a struct of arrays (`Pool`), the trace's arrivals handed out tick
by tick (`Feed`), the gateway's least-loaded pick and the sorted-key helpers the engine's
admission and scoring use. Split out of engine.py; behaviour unchanged."""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Iterator

import numpy as np
from numpy.typing import NDArray

from modelscale.simulate.replica import Slo
from modelscale.simulate.serving import ServingPolicy
from modelscale.simulate.trace import Chunk

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]
MAX_IDS = 1 << 30  # request ids below this leave room for the class in a queue's sort key


# Rows of `Pool.ints` / `Active.ints`, and of `Pool.flts` / `Active.flts`.
_ID, _INP, _OUT, _CACHED, _WIN, _POD, _PRIO = range(7)
_ARR, _RESERVE, _TARGET, _FTT, _REM = range(5)
_N_INTS, _N_POOL_FLTS, _N_ACTIVE_FLTS = 7, 3, 5


class _Row:
    """A field of a `Pool` or `Active`: row `row` of its `ints` (`_IntRow`) or `flts`
    (`_FloatRow`), over the requests it holds; a view, so assigning writes into it. (Two
    classes rather than one with a flag: a field is read several times a tick.)"""

    def __init__(self, row: int) -> None:
        self.row = row


class _IntRow(_Row):
    def __get__(self, obj: _Rows, owner: object = None) -> I64:
        return obj.ints[self.row, : obj.n]

    def __set__(self, obj: _Rows, value: I64) -> None:
        obj.ints[self.row, : obj.n] = value


class _FloatRow(_Row):
    def __get__(self, obj: _Rows, owner: object = None) -> F64:
        return obj.flts[self.row, : obj.n]

    def __set__(self, obj: _Rows, value: F64) -> None:
        obj.flts[self.row, : obj.n] = value


class _Rows:
    """Requests as rows of two 2-D arrays, one row per field: the first `n` columns of
    `ints` (integer fields) and `flts` (float fields)."""

    ints: I64
    flts: F64
    n: int

    id = _IntRow(_ID)
    inp = _IntRow(_INP)
    out = _IntRow(_OUT)
    cached = _IntRow(_CACHED)
    win = _IntRow(_WIN)
    pod = _IntRow(_POD)
    # Priority class (serving.py); 0 without a serving policy.
    prio = _IntRow(_PRIO)
    arr = _FloatRow(_ARR)
    reserve = _FloatRow(_RESERVE)
    target = _FloatRow(_TARGET)  # TTFT target: Slo.ttft_target(prompt)


class Pool(_Rows):
    """Requests waiting for admission (the gateway's, the pods' queues). A take, cat,
    insert or delete is two NumPy calls whatever the number of fields (one call per field
    was a quarter of a replay's time)."""

    __slots__ = ("flts", "ints", "n")

    def __init__(self, ints: I64, flts: F64) -> None:
        self.ints = ints
        self.flts = flts
        self.n = int(ints.shape[1])

    @classmethod
    def empty(cls) -> Pool:
        return cls(_EMPTY_INTS, _EMPTY_FLTS)

    @classmethod
    def arrivals(
        cls,
        *,
        ids: I64,
        arr: F64,
        inp: I64,
        out: I64,
        cached: I64,
        win: I64,
        prio: I64,
        target: F64,
    ) -> Pool:
        ints = np.zeros((_N_INTS, ids.size), dtype=np.int64)
        ints[_ID], ints[_INP], ints[_OUT], ints[_CACHED] = ids, inp, out, cached
        ints[_WIN], ints[_PRIO] = win, prio
        flts = np.empty((_N_POOL_FLTS, ids.size))
        flts[_ARR] = arr
        flts[_RESERVE] = inp + out  # the whole context, held in the KV cache
        flts[_TARGET] = target
        return cls(ints, flts)

    @property
    def size(self) -> int:
        return self.n

    def insert(self, pos: I64, other: Pool) -> Pool:
        """`other`'s requests inserted before the positions `pos` (np.insert)."""
        return Pool(
            np.insert(self.ints, pos, other.ints, axis=1),
            np.insert(self.flts, pos, other.flts, axis=1),
        )

    def delete(self, idx: I64) -> Pool:
        return Pool(np.delete(self.ints, idx, axis=1), np.delete(self.flts, idx, axis=1))

    def take(self, idx: NDArray[np.generic]) -> Pool:
        return Pool(self.ints[:, idx], self.flts[:, idx])

    def cat(self, other: Pool) -> Pool:
        if self.size == 0:
            return other
        if other.size == 0:
            return self
        return Pool(
            np.concatenate((self.ints, other.ints), axis=1),
            np.concatenate((self.flts, other.flts), axis=1),
        )


_EMPTY_INTS: I64 = np.zeros((_N_INTS, 0), dtype=np.int64)
_EMPTY_FLTS: F64 = np.zeros((_N_POOL_FLTS, 0))


class Active(_Rows):
    """Admitted requests (prefilling or decoding), in admission order, in buffers with
    spare capacity: admitting appends in place instead of re-allocating every field each
    tick. Finished requests stay as tombstones (first token at inf, nothing left, a
    reservation of 1) until `compact` drops them."""

    # Time of the first token (end of prefill); inf for a tombstone.
    ftt = _FloatRow(_FTT)
    rem = _FloatRow(_REM)  # output tokens still to decode after the first

    def __init__(self) -> None:
        self.ints = np.zeros((_N_INTS, 64), dtype=np.int64)
        self.flts = np.zeros((_N_ACTIVE_FLTS, 64))
        self.n = 0

    def append(self, pool: Pool, *, ftt: F64, rem: F64) -> None:
        k = pool.size
        end = self.n + k
        if end > self.ints.shape[1]:
            cap = max(2 * self.ints.shape[1], end)
            ints, flts = self.ints, self.flts
            self.ints = np.zeros((_N_INTS, cap), dtype=np.int64)
            self.flts = np.zeros((_N_ACTIVE_FLTS, cap))
            self.ints[:, : self.n] = ints[:, : self.n]
            self.flts[:, : self.n] = flts[:, : self.n]
        self.ints[:, self.n : end] = pool.ints
        self.flts[:_N_POOL_FLTS, self.n : end] = pool.flts
        self.flts[_FTT, self.n : end] = ftt
        self.flts[_REM, self.n : end] = rem
        self.n = end

    def take(self, idx: I64) -> Pool:
        """The requests at `idx` as a `Pool` (for recording them as finished)."""
        return Pool(self.ints[:, idx], self.flts[:_N_POOL_FLTS, idx])

    def compact(self) -> None:
        """Drop the tombstones, keeping the order of the rest."""
        keep = np.flatnonzero(np.isfinite(self.ftt))
        k = keep.size
        self.ints[:, :k] = self.ints[:, keep]
        self.flts[:, :k] = self.flts[:, keep]
        self.n = k


def least_loaded(load: I64, k: int) -> I64:
    """Positions (into `load`) that k successive arrivals go to when each goes to the
    currently least-loaded pod (ties: the lowest position), as one vectorised step."""
    if k == 0:
        return np.zeros(0, dtype=np.int64)
    if k <= 64:  # not many arrivals: one pick each from a heap of (load, position)
        heap = [(x, j) for j, x in enumerate(load.tolist())]
        heapq.heapify(heap)
        picks = []
        for _ in range(k):
            x, j = heap[0]  # the least load, ties: the lowest position
            picks.append(j)
            heapq.heapreplace(heap, (x + 1, j))
        return np.array(picks, dtype=np.int64)
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


def add_counts(target: I64, idx: I64, sign: int = 1) -> None:
    """target[idx] += sign for every element of idx (idx spans few distinct values)."""
    if idx.size <= 4:  # a few: scalar updates are cheaper than the vectorised count
        for i in idx.tolist():
            target[i] += sign
        return
    first = int(idx[0])
    if idx.size == 1 or (idx == first).all():
        target[first] += sign * idx.size
        return
    lo = int(idx.min())
    counts = np.bincount(idx - lo)
    target[lo : lo + counts.size] += sign * counts


def run_starts(keys: I64) -> NDArray[np.bool_]:
    """True where a sorted key array starts a new run of equal keys."""
    out = np.empty(keys.size, dtype=bool)
    if keys.size:
        out[0] = True
        np.not_equal(keys[1:], keys[:-1], out=out[1:])
    return out


def segment_starts(keys: I64) -> I64:
    """For each element of a sorted key array, the index where its key's run starts."""
    out: I64 = np.searchsorted(keys, keys, side="left")
    return out


class Feed:
    """Arrivals from the trace's chunks, handed out tick by tick. Each chunk becomes one
    `Pool` when it is pulled (ids, windows and reservations computed for the whole chunk
    at once); a tick's arrivals are a slice of it."""

    def __init__(
        self,
        chunks: Iterator[Chunk],
        *,
        window_s: float,
        n_windows: int,
        slo: Slo,
        max_context: int,
        serving: ServingPolicy | None = None,
    ) -> None:
        self._chunks = chunks
        self._slo = slo
        self._max_context = max_context
        self._long: list[int] = []  # positions in the chunk of contexts over max_context
        # Whether the last `take` handed out a request whose context exceeds max_context.
        self.has_long = False
        self._serving = serving
        self._rng = np.random.default_rng(serving.seed if serving else 0)
        self._buf: Chunk | None = None
        self._arrivals: list[float] = []  # the chunk's arrival times, for bisect
        self._pool = Pool.empty()
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
                n, arr = nxt.arrival_s.size, nxt.arrival_s
                self._arrivals = arr.tolist()
                context = nxt.input_tokens + nxt.output_tokens
                self._long = np.flatnonzero(context > self._max_context).tolist()
                # Ids run on from the previous chunk, which is used up when this one is pulled.
                self._pool = Pool.arrivals(
                    ids=np.arange(self.next_id, self.next_id + n, dtype=np.int64),
                    arr=arr,
                    inp=nxt.input_tokens,
                    out=nxt.output_tokens,
                    cached=nxt.cached_tokens,
                    win=np.minimum((arr // self.window_s).astype(np.int64), self.n_windows - 1),
                    prio=np.zeros(n, dtype=np.int64),
                    target=self._slo.ttft_target(nxt.input_tokens.astype(np.float64)),
                )
                return

    def _classes(self, c: Chunk, end: int) -> I64:
        n = end - self._pos
        if self._serving is None:
            return np.zeros(n, dtype=np.int64)
        if c.priority is not None:
            return self._serving.from_levels(c.priority[self._pos : end])
        return self._serving.draw(self._rng, n)

    @property
    def next_arrival(self) -> float:
        return math.inf if self._buf is None else self._arrivals[self._pos]

    def take(self, t1: float) -> Pool:
        out = Pool.empty()
        self.has_long = False
        while self._buf is not None and self._arrivals[self._pos] < t1:
            c = self._buf
            end = bisect.bisect_left(self._arrivals, t1, self._pos)  # np.searchsorted's "left"
            part = Pool(self._pool.ints[:, self._pos : end], self._pool.flts[:, self._pos : end])
            if self._serving is not None:
                part.prio[:] = self._classes(c, end)
            out = out.cat(part)
            if bisect.bisect_left(self._long, end) > bisect.bisect_left(self._long, self._pos):
                self.has_long = True
            self.next_id += end - self._pos
            self._pos = end
            if self._pos >= c.arrival_s.size:
                self._pull()
        if self._serving is not None and self.next_id > MAX_IDS:
            raise ValueError(f"a serving policy replays at most {MAX_IDS} requests")
        return out
