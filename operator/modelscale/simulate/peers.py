"""The registry of peer autoscalers the benchmark runs beside ours.

Every peer is told the same thing about one replica (`Sizing`, from one load test) and
has one sweep knob, `scale`: a multiplier on its target (its per-pod target value, its
threshold, or for Dynamo's planner the per-replica capacity its perf model reports), so
that every policy gets a sweep of equal width. docs/peers.md says, per peer, what it
observes, its source and its defaults.

Variants on the metrics the projects recommend for LLM serving sit beside the token-rate
and concurrency ones:

- `hpa-running`: HPA on `vllm:num_requests_running` per pod (batch size; GKE's
  "Best practices for autoscaling LLM inference workloads" recommends batch size or queue
  size for HPA on GPUs);
- `keda-waiting`: KEDA on `sum(vllm:num_requests_waiting)`, threshold 5 per replica (vLLM
  production-stack, docs/source/use_cases/autoscaling-keda.rst and its Helm chart);
- `keda-in-flight`: KEDA on `sum(vllm:num_requests_running + vllm:num_requests_waiting)`;
- `aibrix-apa-kv`: AIBrix APA on `gpu_cache_usage_perc` per pod (AIBrix's metric-based
  autoscaling docs and benchmarks/scenarios/autoscaling/*/apa.yaml use it).
"""

from __future__ import annotations

from dataclasses import dataclass

from modelscale.simulate import baselines
from modelscale.simulate.engine import Policy

# Utilisation-style targets are this share of what one replica sustains within the SLO
# (the load test's figure), as a user sizing an HPA leaves headroom; `scale` sweeps it.
TARGET_UTILISATION = 0.8
# vLLM production-stack's KEDA example: scale up when the queue exceeds 5 per replica.
WAITING_THRESHOLD = 5.0

DYNAMO_PREDICTORS = ("constant", "arima", "kalman", "prophet")


@dataclass(frozen=True)
class Sizing:
    """What every policy is told about one replica (the same for all, from one load test)."""

    tokens_per_s: float  # output tokens/s one warm replica sustains within the SLO
    concurrency: float  # mean in-flight requests per replica at that load
    running_per_replica: float  # mean running requests per replica at that load
    kv_usage: float  # mean KV-cache usage fraction at that load (0..1)

    def __post_init__(self) -> None:
        for name in ("tokens_per_s", "concurrency", "running_per_replica"):
            value = getattr(self, name)
            if not value > 0:
                raise ValueError(f"Sizing.{name} must be > 0 (from the load test), got {value}")
        if not 0.0 < self.kv_usage <= 1.0:
            raise ValueError(f"Sizing.kv_usage must be a fraction in (0, 1], got {self.kv_usage}")

    @property
    def kv_per_running(self) -> float:
        """KV-cache fraction one running sequence holds at the load test's request mix."""
        return self.kv_usage / self.running_per_replica


PEER_NAMES: tuple[str, ...] = (
    "hpa",
    "hpa-running",
    "keda",
    "keda-waiting",
    "keda-in-flight",
    "knative-kpa",
    "aibrix-apa",
    "aibrix-apa-kv",
    *(f"dynamo-{p}" for p in DYNAMO_PREDICTORS),
)


def build(name: str, *, sizing: Sizing, scale: float = 1.0) -> Policy:
    """A fresh peer policy `name`, configured from `sizing`, its target times `scale`."""
    if not scale > 0:
        raise ValueError(f"scale must be > 0, got {scale}")
    util = TARGET_UTILISATION * scale
    tokens = sizing.tokens_per_s * util
    if name == "hpa":
        return baselines.Hpa(target_per_pod=tokens)
    if name == "hpa-running":
        return baselines.Hpa(
            target_per_pod=sizing.running_per_replica * util,
            metric=baselines.running_requests,
            name=name,
        )
    if name == "keda":
        return baselines.Keda(target_per_pod=tokens)
    if name == "keda-waiting":
        return baselines.Keda(
            target_per_pod=WAITING_THRESHOLD * scale, metric=baselines.waiting_requests, name=name
        )
    if name == "keda-in-flight":
        return baselines.Keda(
            target_per_pod=sizing.concurrency * util,
            metric=baselines.in_flight_requests,
            name=name,
        )
    if name == "knative-kpa":
        # Container-concurrency target = the load test's concurrency; KPA applies its own
        # target utilisation 0.7 on top, as Knative does.
        return baselines.KnativeKpa(target_concurrency=sizing.concurrency * scale)
    if name == "aibrix-apa":
        return baselines.AibrixApa(target_per_pod=tokens)
    if name == "aibrix-apa-kv":
        return baselines.AibrixApa(
            target_per_pod=sizing.kv_usage * util,
            metric=baselines.kv_cache_usage_sum(fallback_per_running=sizing.kv_per_running),
            name=name,
        )
    if name.startswith("dynamo-"):
        predictor = name.removeprefix("dynamo-")
        if predictor not in DYNAMO_PREDICTORS:
            raise ValueError(
                f"unknown Dynamo predictor {predictor!r}; choose dynamo-"
                + ", dynamo-".join(DYNAMO_PREDICTORS)
            )
        from modelscale.simulate import dynamo_peer  # noqa: PLC0415 (optional package)

        return dynamo_peer.DynamoPlanner(
            predictor=predictor,
            tokens_per_replica=sizing.tokens_per_s * scale,
            name=name,
        )
    raise ValueError(f"unknown peer {name!r}; choose from {', '.join(PEER_NAMES)}")
