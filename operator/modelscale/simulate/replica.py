"""The replica model: one model server on one GPU, as the simulator sees it.

Defaults describe Llama-3.1-8B-Instruct (BF16, vLLM) on one A100 (sources in
docs/benchmarks.md and FIELD-NOTES "Realistic numbers for a replica model"):

* decode: inter-token latency ITL(b) = alpha + beta * b for a batch of b running sequences.
  alpha = 1/75 s (75 tok/s single stream); beta = 0.4 ms so that batch 8 gives 6.6x the
  single-stream throughput (8 / (alpha + 8 beta) = 495 tok/s ~ 6.6 * 75), and batch 64 gives
  ~1,640 tok/s at ~39 ms ITL, in line with published concurrency sweeps;
* at most `max_batch` = 64 concurrent sequences (the KV-cache knee "at a few dozen");
  further requests wait in the gateway queue;
* prefill: `prefill_tokens_per_s` = 8,000 tok/s (about 16 GFLOP per token at ~40 % of the
  A100's 312 TFLOP/s). Prefills run FIFO per replica; while a replica prefills, its decode
  steps slow down by 1 / (1 - share of the time spent prefilling) (chunked prefill), with the
  decode share never below `min_decode_share`;
* lifecycle: a replica is created, its container turns ready after `startup_s` (L = 120 s:
  image pull, weight load, CUDA-graph capture; measured 37-155 s for comparable models), and
  it is warm after a further `warmup_s` (W = 20 s). Requests served before it is warm run
  `cold_slowdown` times slower (first-use kernel autotuning, allocator and cache growth);
  they count as cold requests.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReplicaParams:
    startup_s: float = 120.0
    warmup_s: float = 20.0
    prefill_tokens_per_s: float = 8000.0
    itl_alpha_s: float = 1.0 / 75.0
    itl_beta_s: float = 0.0004
    max_batch: int = 64
    cold_slowdown: float = 3.0
    min_decode_share: float = 0.2

    @property
    def horizon_s(self) -> float:
        """Creation to warmed: what a new replica needs before it serves at full speed."""
        return self.startup_s + self.warmup_s

    def itl(self, batch: float) -> float:
        return self.itl_alpha_s + self.itl_beta_s * batch


@dataclass(frozen=True)
class Slo:
    """LLM-style SLO: P99 time to first token and P99 time per output token. A request's
    TTFT target may grow with its prompt: `ttft_s` + `ttft_per_1k_input_s` per 1,000
    prompt tokens (0 = a fixed TTFT target)."""

    ttft_s: float = 2.0
    tpot_s: float = 0.1
    ttft_per_1k_input_s: float = 0.0

    def ttft_target(self, input_tokens: float) -> float:
        """TTFT target of a request with `input_tokens` prompt tokens (works on arrays)."""
        return self.ttft_s + self.ttft_per_1k_input_s * input_tokens / 1000.0


def sustainable_request_rate(
    params: ReplicaParams,
    *,
    mean_input: float,
    mean_output: float,
    slo: Slo,
    max_prefill_share: float = 0.7,
) -> float:
    """Highest steady request rate (req/s) one warm replica serves within the SLO, in the
    fluid model: prefill share u = rate * in / prefill capacity stays <= `max_prefill_share`
    (so prefill queueing keeps TTFT bounded), the batch b that Little's law gives for decode fits in
    `max_batch`, and ITL(b) / (1 - u) <= TPOT target. Found by bisection."""

    def feasible(rate: float) -> bool:
        u = rate * mean_input / params.prefill_tokens_per_s
        if u > max_prefill_share or mean_input / params.prefill_tokens_per_s > slo.ttft_target(
            mean_input
        ):
            return False
        k = rate * max(0.0, mean_output - 1.0) / (1.0 - u)
        if k * params.itl_beta_s >= 1.0:
            return False
        batch = k * params.itl_alpha_s / (1.0 - k * params.itl_beta_s)
        return batch <= params.max_batch and params.itl(batch) / (1.0 - u) <= slo.tpot_s

    lo, hi = 0.0, 1000.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if feasible(mid) else (lo, mid)
    return lo
