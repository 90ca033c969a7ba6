"""The replica model: one model server on one GPU, as the simulator sees it.

Defaults describe Llama-3.1-8B-Instruct (BF16) on one A100-40GB. Every constant, its
derivation and its source are in docs/replica-model.md; in short:

* KV cache: a replica holds `kv_capacity_tokens` tokens of context (about 155 k: the GPU
  memory vLLM may use, 0.9 x 39.4 GiB, minus 14.96 GiB of weights and ~1 GiB of runtime,
  at 128 KiB per token). A request is admitted only when its whole context (prompt plus
  output) fits beside the running ones — the reservation TensorRT-LLM's default
  GUARANTEED_NO_EVICT scheduler makes — and at most `max_batch` sequences run at once;
* decode: inter-token latency ITL = alpha + beta * b + gamma * C for b running sequences
  holding C context tokens (each step reads the weights, alpha, and the KV cache, gamma);
* prefill: n prompt tokens take n / `prefill_tokens_per_s` + `prefill_quadratic_s` * n^2
  (attention's n^2 FLOPs); prefix-cache hits skip the cached part of the prompt. While a
  replica prefills, its decode steps slow down by 1 / (1 - prefill share) (chunked
  prefill), the decode share never below `min_decode_share`;
* lifecycle: container ready after a start-up time drawn from a lognormal around the
  median `startup_s` (shape `startup_sigma`, clipped to [0.5, 2] x median), warm after a
  further `warmup_s`. Requests served before warm run `cold_slowdown` times slower (an
  assumption: see docs/replica-model.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import overload

import numpy as np
from numpy.typing import NDArray

from modelscale.simulate.serving import ServingPolicy

GIB = 1024.0**3


def kv_bytes_per_token(*, layers: int, kv_heads: int, head_dim: int, dtype_bytes: int) -> int:
    """Bytes of KV cache one token of context takes: K and V for every layer."""
    return 2 * layers * kv_heads * head_dim * dtype_bytes


def kv_cache_tokens(
    *,
    gpu_memory_gib: float,
    gpu_memory_utilization: float,
    weights_gib: float,
    runtime_gib: float,
    bytes_per_token: int,
) -> int:
    """vLLM's sizing of the KV cache: what is left of `gpu_memory_utilization` of the GPU
    after the weights and the runtime (activation peak, CUDA graphs, non-torch memory)."""
    free = gpu_memory_gib * gpu_memory_utilization - weights_gib - runtime_gib
    return max(0, int(free * GIB // bytes_per_token))


# Llama-3.1-8B: 32 layers, 8 KV heads of dimension 128, BF16 -> 128 KiB per token.
LLAMA_3_1_8B_KV_BYTES = kv_bytes_per_token(layers=32, kv_heads=8, head_dim=128, dtype_bytes=2)
# A100-40GB as torch reports it (39.39 GiB), vLLM's default utilisation 0.9, 8.03 B BF16
# weights (14.96 GiB), ~1 GiB activation peak + CUDA graphs + non-torch memory.
A100_40GB_LLAMA_8B_KV_TOKENS = kv_cache_tokens(
    gpu_memory_gib=39.39,
    gpu_memory_utilization=0.9,
    weights_gib=14.96,
    runtime_gib=1.0,
    bytes_per_token=LLAMA_3_1_8B_KV_BYTES,
)


@dataclass(frozen=True)
class ReplicaParams:
    startup_s: float = 120.0  # median creation -> container ready (L)
    warmup_s: float = 20.0  # ready -> warm (W)
    startup_sigma: float = 0.25  # lognormal shape of L; 0 = every replica takes exactly L
    prefill_tokens_per_s: float = 8000.0
    prefill_quadratic_s: float = 2.0e-9  # s per prompt token^2 (attention)
    itl_alpha_s: float = 1.0 / 75.0
    itl_beta_s: float = 0.00028  # s per running sequence
    itl_per_context_token_s: float = 1.1e-7  # s per context token in the batch (KV reads)
    max_batch: int = 256  # vLLM's default max_num_seqs
    kv_capacity_tokens: int = A100_40GB_LLAMA_8B_KV_TOKENS
    cold_slowdown: float = 3.0
    min_decode_share: float = 0.2
    # Priority classes, queue limits and timeouts (simulate/serving.py); None: one FIFO
    # queue per pod without limits, as before.
    serving: ServingPolicy | None = None

    def __post_init__(self) -> None:
        if self.kv_capacity_tokens <= 0:
            raise ValueError(
                "kv_capacity_tokens must be > 0: the weights leave no GPU memory for the KV "
                "cache; use a larger GPU or a smaller model"
            )
        if self.max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {self.max_batch}")
        if self.startup_sigma < 0:
            raise ValueError(f"startup_sigma must be >= 0, got {self.startup_sigma}")

    @property
    def horizon_s(self) -> float:
        """Creation to warmed at the median start-up: what a new replica needs before it
        serves at full speed."""
        return self.startup_s + self.warmup_s

    def itl(self, batch: float, context_tokens: float = 0.0) -> float:
        """Seconds per decode step for `batch` sequences holding `context_tokens` in all."""
        return (
            self.itl_alpha_s
            + self.itl_beta_s * batch
            + self.itl_per_context_token_s * (context_tokens)
        )

    @overload
    def prefill_s(self, tokens: float) -> float: ...
    @overload
    def prefill_s(self, tokens: NDArray[np.float64]) -> NDArray[np.float64]: ...

    def prefill_s(self, tokens: float | NDArray[np.float64]) -> float | NDArray[np.float64]:
        """Seconds to prefill a prompt of `tokens` (not cached) tokens on a warm replica."""
        return tokens / self.prefill_tokens_per_s + self.prefill_quadratic_s * tokens * tokens

    def startup_bounds(self) -> tuple[float, float]:
        """The range start-up times are clipped to."""
        return 0.5 * self.startup_s, 2.0 * self.startup_s


@dataclass(frozen=True)
class Slo:
    """LLM-style SLO: P99 time to first token and P99 time per output token. A request's
    TTFT target may grow with its prompt: `ttft_s` + `ttft_per_1k_input_s` per 1,000
    prompt tokens (0 = a fixed TTFT target)."""

    ttft_s: float = 2.0
    tpot_s: float = 0.1
    ttft_per_1k_input_s: float = 0.0

    @overload
    def ttft_target(self, input_tokens: float) -> float: ...
    @overload
    def ttft_target(self, input_tokens: NDArray[np.float64]) -> NDArray[np.float64]: ...

    def ttft_target(self, input_tokens: float | NDArray[np.float64]) -> float | NDArray[np.float64]:
        """TTFT target of a request with `input_tokens` prompt tokens (or of each of an
        array of requests)."""
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
    fluid model: prefill share u = rate * prefill time / 1 s stays <= `max_prefill_share`
    (so prefill queueing keeps TTFT bounded), the prefill of a mean prompt fits the TTFT
    target, the batch b that Little's law gives for decode fits in `max_batch` and its
    context (b x (input + output / 2)) in the KV cache, and ITL(b, context) / (1 - u) <=
    TPOT target. Found by bisection; 0 when even one request cannot meet the SLO (a prompt
    whose prefill exceeds the TTFT target, or a context larger than the KV cache)."""
    prefill = params.prefill_s(mean_input)
    ctx_per_seq = mean_input + mean_output / 2.0
    if prefill > slo.ttft_target(mean_input) or mean_input + mean_output > (
        params.kv_capacity_tokens
    ):
        return 0.0
    # ITL per decode step grows with the batch through beta and through its context.
    per_seq = params.itl_beta_s + params.itl_per_context_token_s * ctx_per_seq

    def feasible(rate: float) -> bool:
        u = rate * prefill
        if u > max_prefill_share:
            return False
        k = rate * max(0.0, mean_output - 1.0) / (1.0 - u)
        if k * per_seq >= 1.0:
            return False
        batch = k * params.itl_alpha_s / (1.0 - k * per_seq)
        return (
            batch <= params.max_batch
            and batch * ctx_per_seq <= params.kv_capacity_tokens
            and params.itl(batch, batch * ctx_per_seq) / (1.0 - u) <= slo.tpot_s
        )

    lo, hi = 0.0, 1000.0
    if not math.isfinite(prefill) or not feasible(1e-9):
        return 0.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if feasible(mid) else (lo, mid)
    return lo
