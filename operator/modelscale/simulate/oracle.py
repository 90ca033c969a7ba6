"""The offline oracle: perfect foresight of the whole trace, in the same replica model.

Per 1-minute interval it finds the fewest warm replicas that keep that interval's P99 TTFT
and P99 TPOT within the SLO: it starts from a fluid lower bound (the interval's request
rate over what one replica sustains with that interval's token mix) and adds a replica to
every interval that still misses the SLO in a replay (and to the one before, whose backlog
it inherits), until every interval meets it or `max_rounds` is reached. Each replica is
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


def solve(
    trace: Trace, *, params: ReplicaParams, slo: Slo, dt: float = 0.5, max_rounds: int = 12
) -> OracleRun:
    need = lower_bound(trace, params=params, slo=slo)
    rounds = 0
    while True:
        rounds += 1
        policy = Oracle(lives=schedule(need, horizon_s=params.horizon_s), dt=dt)
        result = engine.run(
            trace, policy, params=params, initial_replicas=policy.replicas_at(0.0), dt=dt
        )
        ok = figures.window_ok(trace, result, slo)
        bad = np.flatnonzero(~ok[: need.size])
        if bad.size == 0 or rounds >= max_rounds:
            return OracleRun(need, result, policy, rounds, meets_slo=bad.size == 0)
        need = need.copy()
        need[bad] += 1
        need[np.maximum(bad - 1, 0)] += 1 * (bad > 0)
