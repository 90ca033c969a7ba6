"""Requests in flight as a struct of arrays (`Pool`), the trace's arrivals handed out tick
by tick (`Feed`), the gateway's least-loaded pick and the sorted-key helpers the engine's
admission and scoring use. Split out of engine.py; behaviour unchanged."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
from numpy.typing import NDArray

from modelscale.simulate.serving import ServingPolicy
from modelscale.simulate.trace import Chunk

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]
MAX_IDS = 1 << 30  # request ids below this leave room for the class in a queue's sort key


@dataclass
class Pool:
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
    prio: I64  # priority class (serving.py); 0 without a serving policy

    @classmethod
    def empty(cls) -> Pool:
        i, f = np.zeros(0, dtype=np.int64), np.zeros(0)
        return cls(i, f, i, i, i, i, i, np.zeros(0, dtype=bool), f, f, f, i)

    @classmethod
    def arrivals(
        cls, *, ids: I64, arr: F64, inp: I64, out: I64, cached: I64, win: I64, prio: I64
    ) -> Pool:
        n = ids.size
        i, f = np.zeros(n, dtype=np.int64), np.zeros(n)
        reserve = (inp + out).astype(np.float64)  # the whole context, held in the KV cache
        b = np.zeros(n, dtype=bool)
        return cls(ids, arr, inp, out, cached, win, i, b, reserve, f, f, prio)

    @property
    def size(self) -> int:
        return int(self.id.size)

    def columns(self) -> tuple[NDArray[Any], ...]:
        """Every field, in declaration order (the columns differ in dtype)."""
        return tuple(getattr(self, name) for name in _POOL_FIELDS)

    def insert(self, pos: I64, other: Pool) -> Pool:
        """`other`'s requests inserted before the positions `pos` (np.insert)."""
        pairs = zip(self.columns(), other.columns(), strict=True)
        return Pool(*(np.insert(a, pos, b) for a, b in pairs))

    def delete(self, idx: I64) -> Pool:
        return Pool(*(np.delete(a, idx) for a in self.columns()))

    def slice(self, a: int, b: int) -> Pool:
        return Pool(*(c[a:b] for c in self.columns()))

    def take(self, idx: NDArray[np.generic]) -> Pool:
        # Lists, not generators, over the column tuple read once: take and cat run several
        # times per tick, and the generator over dataclass fields cost a tenth of a replay.
        return Pool(*[getattr(self, n)[idx] for n in _POOL_FIELDS])

    def cat(self, other: Pool) -> Pool:
        if self.size == 0:
            return other
        if other.size == 0:
            return self
        return Pool(*[np.concatenate((getattr(self, n), getattr(other, n))) for n in _POOL_FIELDS])


# Read once: dataclasses.fields() on every take/cat was a tenth of a replay's time.
_POOL_FIELDS = tuple(f.name for f in fields(Pool))


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


def add_counts(target: I64, idx: I64, sign: int = 1) -> None:
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
    """Arrivals from the trace's chunks, handed out tick by tick."""

    def __init__(
        self,
        chunks: Iterator[Chunk],
        *,
        window_s: float,
        n_windows: int,
        serving: ServingPolicy | None = None,
    ) -> None:
        self._chunks = chunks
        self._serving = serving
        self._rng = np.random.default_rng(serving.seed if serving else 0)
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

    def _classes(self, c: Chunk, end: int) -> I64:
        n = end - self._pos
        if self._serving is None:
            return np.zeros(n, dtype=np.int64)
        if c.priority is not None:
            return self._serving.from_levels(c.priority[self._pos : end])
        return self._serving.draw(self._rng, n)

    @property
    def next_arrival(self) -> float:
        return math.inf if self._buf is None else float(self._buf.arrival_s[self._pos])

    def take(self, t1: float) -> Pool:
        parts: list[Pool] = []
        while self._buf is not None and self._buf.arrival_s[self._pos] < t1:
            c = self._buf
            end = self._pos + int(np.searchsorted(c.arrival_s[self._pos :], t1, side="left"))
            n = end - self._pos
            arr = c.arrival_s[self._pos : end]
            prio = self._classes(c, end)
            parts.append(
                Pool.arrivals(
                    ids=np.arange(self.next_id, self.next_id + n, dtype=np.int64),
                    arr=arr,
                    inp=c.input_tokens[self._pos : end],
                    out=c.output_tokens[self._pos : end],
                    cached=c.cached_tokens[self._pos : end],
                    win=np.minimum((arr // self.window_s).astype(np.int64), self.n_windows - 1),
                    prio=prio,
                )
            )
            self.next_id += n
            self._pos = end
            if self._pos >= c.arrival_s.size:
                self._pull()
        if not parts:
            return Pool.empty()
        if self._serving is not None and self.next_id > MAX_IDS:
            raise ValueError(f"a serving policy replays at most {MAX_IDS} requests")
        out = parts[0]
        for part in parts[1:]:
            out = out.cat(part)
        return out
