"""The warm-up part of the ModelDeployment spec (`spec.warmUp`): real inference requests
sent to every new pod before it gets traffic. Re-exported by `v1alpha1`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from modelscale.api.base import _Model, _sub

WarmUpProtocol = Literal["HTTP", "GRPC"]

MSG_WARMUP_INPUTS = "warmUp needs explicit requests or autoGenerate: true when enabled"
MSG_STABLE_N = "warmUp.success.stableLastN must not exceed warmUp.count"


class InferInput(_Model):
    """One input tensor of a warm-up request."""

    datatype: str = Field(min_length=1, max_length=16)
    """Triton datatype: BYTES, FP32, INT32, BOOL, ..."""
    shape: list[int] = Field(min_length=0, max_length=8)
    """Tensor shape, e.g. `[1, 1]`."""
    data: list[Any]
    """Values, flattened or nested; strings for BYTES."""


class WarmUpRequest(_Model):
    """An explicit warm-up inference request."""

    inputs: dict[str, InferInput]
    """Input tensors by name."""
    outputs: list[str] = Field(default_factory=list)
    """Outputs to request (empty: all)."""
    parameters: dict[str, Any] = Field(default_factory=dict)
    """Request parameters, e.g. `{"max_tokens": 64}` for the vLLM backend."""


class WarmUpSuccess(_Model):
    """When a pod counts as warm."""

    stable_last_n: int = Field(default=3, ge=1)
    """The last N requests must all succeed and be within `maxLatencyFactor`."""
    max_latency_factor: float = Field(default=1.5, ge=1)
    """... of the median latency of those last N requests (the model stopped getting
    faster)."""


class WarmUp(_Model):
    """Warm every new pod with real inference requests before it gets traffic (pod
    readiness gate `modelscale.dev/warmed-up`)."""

    enabled: bool = True
    """Warm pods up before they get traffic. false: a pod is Ready as soon as Triton is."""
    protocol: WarmUpProtocol = "GRPC"
    """gRPC also serves decoupled (streaming) models such as the vLLM backend's."""
    requests: list[WarmUpRequest] = Field(default_factory=list)
    """Explicit requests, sent round-robin. Empty: generated from the model's metadata when
    `autoGenerate` is true."""
    auto_generate: bool = True
    """Without explicit `requests`, build requests from the model's metadata (input names,
    datatypes, shapes)."""
    count: int = Field(default=8, ge=1, le=10000)
    """Requests sent per pod at least; up to 4 x count while latencies are still falling."""
    concurrency: int = Field(default=2, ge=1, le=1024)
    """Warm-up requests in flight at once per pod."""
    timeout_seconds: float = Field(default=60.0, gt=0, le=3600)
    """Per request; also bounds the wait for the server and the model to be ready."""
    max_attempts: int = Field(default=3, ge=1, le=100)
    """Warm-up rounds before the pod is reported as failing warm-up."""
    success: WarmUpSuccess = _sub(WarmUpSuccess)

    @model_validator(mode="after")
    def _check(self) -> WarmUp:
        if self.enabled and not self.requests and not self.auto_generate:
            raise ValueError(MSG_WARMUP_INPUTS)
        if self.success.stable_last_n > self.count:
            raise ValueError(MSG_STABLE_N)
        return self
