"""A simulated load test of one warm replica, the way a user sizes a deployment: replay
requests drawn from the trace's own (input, output) mix as Poisson arrivals at a fixed
rate, and find the highest rate at which the run's P99 TTFT (against each request's TTFT
target) and P99 TPOT meet the SLO. Every policy's target is derived from this one
measurement: request rate, output tokens/s, in-flight requests (concurrency), running
requests and KV-cache usage at that rate."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from modelscale.simulate import engine
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
    running: float = 1.0  # mean running requests (vLLM num_requests_running) at that rate
    kv_usage: float = 0.0  # mean KV-cache usage fraction at that rate


class _Fixed:
    name = "loadtest"
    interval_s = 1e9
    warmup_gate = True

    def decide(self, view: View) -> int:
        return 1


class _Run:
    def __init__(self, ok: bool, concurrency: float, running: float, kv_usage: float) -> None:
        self.ok, self.concurrency, self.running, self.kv_usage = ok, concurrency, running, kv_usage


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
        cached_tokens=None if trace.cached_tokens is None else trace.cached_tokens[pick],
    )


def _p99(values: np.ndarray) -> float:  # type: ignore[type-arg]
    return float(np.quantile(values, 0.99, method="higher")) if values.size else 0.0


def _meets(trace: Trace, *, rate: float, params: ReplicaParams, slo: Slo, seed: int) -> _Run:
    synth = _synthetic(trace, rate=rate, seed=seed)
    # A replica's capacity is measured first-come first-served, whatever the serving
    # policy: the policies' targets (and so their sizing) stay the same with or without it.
    plain = dataclasses.replace(params, serving=None)
    result = engine.run(
        synth, _Fixed(), params=plain, initial_replicas=1, drain_s=120.0, slo=slo, seed=seed
    )
    keep = synth.arrival_s >= WARMUP_S
    over = result.ttft[keep] - slo.ttft_target(synth.input_tokens[keep].astype(np.float64))
    ok = _p99(over) <= 0.0 and _p99(result.tpot[keep]) <= slo.tpot_s
    finished = np.isfinite(result.tpot) & keep
    # Little's law on the measured part of the run.
    busy = result.ttft[finished] + result.tpot[finished] * (synth.output_tokens[finished] - 1)
    conc = float(busy.sum() / (DURATION_S - WARMUP_S)) if finished.any() else 0.0
    measured = (result.times >= WARMUP_S) & (result.times < DURATION_S)
    running = float(result.running[measured].mean()) if measured.any() else 0.0
    kv = float(result.kv_usage[measured].mean()) if measured.any() else 0.0
    return _Run(ok, conc, running, kv)


def measure(trace: Trace, *, params: ReplicaParams, slo: Slo, seed: int = 0) -> Capacity:
    if trace.requests == 0:
        return Capacity(1.0, 1.0, 1.0)
    mean_in = float(trace.input_tokens.mean())
    mean_out = float(trace.output_tokens.mean())
    hi = 1.2 * sustainable_request_rate(
        params, mean_input=mean_in, mean_output=mean_out, slo=slo, max_prefill_share=0.95
    )
    lo = 0.0
    best = _Run(False, 0.0, 0.0, 0.0)
    for _ in range(8):
        mid = (lo + hi) / 2
        got = _meets(trace, rate=mid, params=params, slo=slo, seed=seed)
        if got.ok:
            lo, best = mid, got
        else:
            hi = mid
    return Capacity(
        lo,
        lo * mean_out,
        max(best.concurrency, 1.0),
        running=max(best.running, 1.0),
        kv_usage=best.kv_usage,
    )
