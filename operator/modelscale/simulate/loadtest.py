"""A simulated load test of one warm replica, the way a user sizes a deployment: replay
requests drawn from the trace's own (input, output) mix as Poisson arrivals at a fixed
rate, and find the highest rate at which the run's P99 TTFT and P99 TPOT meet the SLO.
Every policy's target is derived from this one measurement."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from modelscale.simulate import engine, figures
from modelscale.simulate.engine import View
from modelscale.simulate.replica import ReplicaParams, Slo, sustainable_request_rate
from modelscale.simulate.trace import Trace

DURATION_S = 600.0
WARMUP_S = 60.0


@dataclass(frozen=True)
class Capacity:
    request_rate: float  # req/s one warm replica sustains within the SLO
    output_tokens_per_s: float
    concurrency: float  # mean in-flight requests at that rate


class _Fixed:
    name = "loadtest"
    interval_s = 1e9
    warmup_gate = True

    def decide(self, view: View) -> int:
        return 1


def _synthetic(trace: Trace, *, rate: float, seed: int) -> Trace:
    rng = np.random.default_rng(seed)
    n = int(rng.poisson(rate * DURATION_S))
    pick = rng.integers(0, trace.requests, n)
    return Trace(
        name="loadtest",
        arrival_s=np.sort(rng.uniform(0.0, DURATION_S, n)),
        input_tokens=trace.input_tokens[pick],
        output_tokens=trace.output_tokens[pick],
        duration_s=DURATION_S,
    )


def _meets(
    trace: Trace, *, rate: float, params: ReplicaParams, slo: Slo, seed: int
) -> tuple[bool, float]:
    synth = _synthetic(trace, rate=rate, seed=seed)
    result = engine.run(synth, _Fixed(), params=params, initial_replicas=1, drain_s=120.0)
    keep = synth.arrival_s >= WARMUP_S
    ok = (
        figures.p99(result.ttft[keep] / figures.ttft_targets(slo, synth.input_tokens[keep])) <= 1.0
        and figures.p99(result.tpot[keep]) <= slo.tpot_s
    )
    finished = np.isfinite(result.tpot) & keep
    # Little's law on the measured part of the run.
    busy = result.ttft[finished] + result.tpot[finished] * (synth.output_tokens[finished] - 1)
    conc = float(busy.sum() / (DURATION_S - WARMUP_S)) if finished.any() else 0.0
    return ok, conc


def measure(trace: Trace, *, params: ReplicaParams, slo: Slo, seed: int = 0) -> Capacity:
    if trace.requests == 0:
        return Capacity(1.0, 1.0, 1.0)
    mean_in = float(trace.input_tokens.mean())
    mean_out = float(trace.output_tokens.mean())
    hi = 1.2 * sustainable_request_rate(
        params, mean_input=mean_in, mean_output=mean_out, slo=slo, max_prefill_share=0.95
    )
    lo, conc = 0.0, 0.0
    for _ in range(8):
        mid = (lo + hi) / 2
        ok, c = _meets(trace, rate=mid, params=params, slo=slo, seed=seed)
        if ok:
            lo, conc = mid, c
        else:
            hi = mid
    return Capacity(lo, lo * mean_out, max(conc, 1.0))
