"""The offline oracle: perfect foresight of the whole trace, in the same replica model.

Per 1-minute interval it finds the fewest warm replicas that keep that interval's P99 TTFT
and P99 TPOT within the SLO: it starts from a fluid lower bound (the interval's request
rate over what one replica sustains with that interval's token mix) and adds a replica to
every interval that still misses the SLO in a replay (and to the one before, whose backlog
it inherits), until every interval meets it or `max_rounds` is reached; then it tries to
give one back everywhere and keeps only the ones a replay shows are needed. Each replica is
created L+W before it is needed, so it is warm on time, and is kept through a dip shorter
than L+W, since stopping and restarting it would cost at least as much.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from modelscale.simulate import engine, figures
from modelscale.simulate.engine import View
from modelscale.simulate.replica import ReplicaParams, Slo, sustainable_request_rate
from modelscale.simulate.trace import Trace

INTERVAL_S = figures.WINDOW_S


def lower_bound(trace: Trace, *, params: ReplicaParams, slo: Slo) -> NDArray[np.int64]:
    """Warm replicas each interval needs at least, by the fluid model."""
    n = max(1, int(np.ceil(trace.duration_s / INTERVAL_S)))
    idx = np.minimum((trace.arrival_s // INTERVAL_S).astype(np.int64), n - 1)
    counts = np.bincount(idx, minlength=n).astype(np.float64)
    ins = np.bincount(idx, weights=trace.input_tokens, minlength=n)
    outs = np.bincount(idx, weights=trace.output_tokens, minlength=n)
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
        rate = counts[w] / INTERVAL_S
        need[w] = max(1, int(np.ceil(rate / max(per_replica, 1e-9))))
    return need


def schedule(need: NDArray[np.int64], *, horizon_s: float) -> list[tuple[float, float]]:
    """(start, end) of every replica's life, in seconds: replica k (1-based) is needed in
    the intervals where need >= k; gaps shorter than `horizon_s` are bridged, and each run
    starts `horizon_s` early (runs that begin at t=0 were warm already)."""
    lives: list[tuple[float, float]] = []
    n = need.size
    for k in range(1, int(need.max()) + 1):
        on = need >= k
        runs: list[list[float]] = []
        w = 0
        while w < n:
            if not on[w]:
                w += 1
                continue
            s = w
            while w < n and on[w]:
                w += 1
            start, end = s * INTERVAL_S, w * INTERVAL_S
            if runs and start - runs[-1][1] < horizon_s:
                runs[-1][1] = end
            else:
                runs.append([start, end])
        for start, end in runs:
            lives.append((start - horizon_s if start > 0 else -horizon_s, end))
    return lives


class Oracle:
    """Replays a precomputed replica schedule; gated like ours (never serves cold)."""

    warmup_gate = True

    def __init__(self, *, lives: list[tuple[float, float]], dt: float) -> None:
        self.name = "oracle"
        self.interval_s = dt
        starts = np.array(sorted(s for s, _ in lives))
        ends = np.array(sorted(e for _, e in lives))
        self._starts, self._ends = starts, ends

    def replicas_at(self, t: float) -> int:
        started = int(np.searchsorted(self._starts, t, side="right"))
        ended = int(np.searchsorted(self._ends, t, side="right"))
        return max(1, started - ended)

    def decide(self, view: View) -> int:
        return self.replicas_at(view.now)


@dataclass(frozen=True)
class OracleRun:
    need: NDArray[np.int64]
    result: engine.RunResult
    policy: Oracle
    rounds: int
    meets_slo: bool


def _replay(
    trace: Trace, need: NDArray[np.int64], *, params: ReplicaParams, slo: Slo, dt: float
) -> tuple[Oracle, engine.RunResult, NDArray[np.bool_]]:
    policy = Oracle(lives=schedule(need, horizon_s=params.horizon_s), dt=dt)
    result = engine.run(
        trace, policy, params=params, initial_replicas=policy.replicas_at(0.0), dt=dt
    )
    ok = figures.window_ok(trace, result, slo)[: need.size]
    return policy, result, ok


def _bump(need: NDArray[np.int64], bad: NDArray[np.int64]) -> NDArray[np.int64]:
    need = need.copy()
    need[bad] += 1
    prev = bad[bad > 0] - 1
    need[prev] = np.maximum(need[prev], need[prev + 1] - 1)
    return need


def solve(
    trace: Trace,
    *,
    params: ReplicaParams,
    slo: Slo,
    dt: float = 0.5,
    max_rounds: int = 12,
    trim_rounds: int = 2,
) -> OracleRun:
    """Repair upwards from the fluid lower bound until every interval meets the SLO, then
    try to give back one replica in every interval (keeping it only where the replay says
    it was needed), so the greedy repair's overshoot does not inflate the reference."""
    need = lower_bound(trace, params=params, slo=slo)
    rounds = 0
    best: tuple[NDArray[np.int64], Oracle, engine.RunResult] | None = None

    def repair(need: NDArray[np.int64]) -> tuple[NDArray[np.int64], Oracle, engine.RunResult, bool]:
        nonlocal rounds
        while True:
            rounds += 1
            policy, result, ok = _replay(trace, need, params=params, slo=slo, dt=dt)
            bad = np.flatnonzero(~ok)
            if bad.size == 0 or rounds >= max_rounds:
                return need, policy, result, bad.size == 0
            need = _bump(need, bad)

    need, policy, result, meets = repair(need)
    if meets:
        best = (need, policy, result)
        for _ in range(trim_rounds):
            fewer = np.maximum(need - 1, 1)
            if np.array_equal(fewer, need):
                break
            rounds += 1
            _, _, ok = _replay(trace, fewer, params=params, slo=slo, dt=dt)
            bad = np.flatnonzero(~ok)
            keep = np.zeros(need.size, dtype=bool)
            keep[bad] = True
            keep[bad[bad > 0] - 1] = True
            trial = np.where(keep, need, fewer)
            if np.array_equal(trial, need):
                break
            trial, policy, result, meets = repair(trial)
            if not meets or result.replica_seconds >= best[2].replica_seconds:
                break
            need = trial
            best = (need, policy, result)
        need, policy, result = best
        meets = True
    return OracleRun(need, result, policy, rounds, meets_slo=meets)
