"""The toy LLM's tuning and the replay settings shared by the autoscaling e2e test and the
demo, which shows the same scale-out (1 -> 3 replicas before the P99 breaks)."""

from __future__ import annotations

from harness import loadgen

# The toy at 10 ms per token: the knee (8 concurrent requests) is 800 tokens/s per pod;
# past it throughput stays flat and latency grows with the queue. Half the 5 ms default
# keeps the total CPU of three pods plus the load generator bearable on two shared cores.
TOY_ENV = {
    "TOY_LLM_TOKEN_COST_S": "0.01",
    "TOY_LLM_LOAD_DELAY_S": "0.5",
    # A cold engine: the first requests after load are slow, so warm-up matters.
    "TOY_LLM_COLD_REQUESTS": "4",
    "TOY_LLM_COLD_PENALTY_S": "1.0",
}
MAX_OUTPUT_TOKENS = 64  # 0.64 s per request at or below the knee
SLO_P99_S = 2.0  # met below the knee (about 0.7 s), broken by a queue of ~25 requests
MIN_REPLICAS, MAX_REPLICAS = 1, 3
REPLAY: loadgen.ReplayOptions = {"max_output_tokens": MAX_OUTPUT_TOKENS, "max_concurrency": 128}
