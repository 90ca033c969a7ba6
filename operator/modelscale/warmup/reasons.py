"""Reasons (CamelCase) for the warm-up gate condition, events and metrics."""

from __future__ import annotations

WARMED_UP = "WarmedUp"
DISABLED = "WarmUpDisabled"
IN_PROGRESS = "WarmUpInProgress"
REQUEST_FAILED = "WarmUpFailed"
NOT_STABLE = "LatencyNotStable"
MODEL_NOT_READY = "ModelNotReady"
TIMEOUT = "WarmUpTimeout"
INVALID_REQUEST = "InvalidWarmUpRequest"
CANCELLED = "WarmUpCancelled"
GAVE_UP = "WarmUpGaveUp"
RESTARTED = "ContainerRestarted"
INVALID_SERVING_POLICY = "InvalidServingPolicy"
POLICY_NOT_APPLIED = "ServingPolicyNotApplied"
