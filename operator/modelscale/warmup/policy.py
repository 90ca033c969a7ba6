"""`spec.serving` as Triton model configuration: the override the operator loads the model
with, and whether the configuration a server reports has the policy in force. Pure.

Triton's load API takes a *whole* configuration (fields left out are not kept from the
repository's: an override without `input` loads a model with no inputs), so the override is
the server's own configuration (`GET /v2/models/<name>/config`) with the policy's fields
replaced. Field names and units are Triton's JSON model configuration's.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from modelscale.api.v1alpha1 import QueuePolicy, Serving


class PolicyError(ValueError):
    """The policy cannot apply to this model; the message says why and what to change."""


def _queue(policy: QueuePolicy) -> dict[str, Any]:
    return {
        "timeout_action": policy.timeout_action,
        "default_timeout_microseconds": policy.default_timeout_microseconds,
        "allow_timeout_override": policy.allow_timeout_override,
        "max_queue_size": policy.max_queue_size,
    }


def _dynamic_batching(serving: Serving) -> dict[str, Any]:
    batching: dict[str, Any] = {}
    if serving.dynamic_batching is not None:
        batching["preferred_batch_size"] = list(serving.dynamic_batching.preferred_batch_sizes)
        batching["max_queue_delay_microseconds"] = (
            serving.dynamic_batching.max_queue_delay_microseconds
        )
    if serving.queue is not None:
        batching["default_queue_policy"] = _queue(serving.queue)
    if serving.priorities is not None:
        batching["priority_levels"] = serving.priorities.levels
        batching["default_priority_level"] = serving.priorities.default_level
        batching["priority_queue_policy"] = {
            str(q.level): _queue(q) for q in serving.priorities.queues
        }
    return batching


def is_decoupled(config: Mapping[str, Any]) -> bool:
    policy = config.get("model_transaction_policy")
    return isinstance(policy, Mapping) and bool(policy.get("decoupled"))


def overlay(config: Mapping[str, Any], serving: Serving) -> dict[str, Any]:
    """The configuration to load: `config` with the policy's fields set. Raises
    `PolicyError` for a decoupled model (Triton's dynamic batcher would not apply)."""
    result = copy.deepcopy(dict(config))
    if serving.uses_dynamic_batcher:
        if is_decoupled(config):
            raise PolicyError(
                f"model {config.get('name', '')!r} is decoupled (streaming): Triton's dynamic "
                "batcher, queue policies and priorities do not apply to it; remove "
                "serving.dynamicBatching, serving.queue and serving.priorities"
            )
        # Triton refuses this one at load with only "failed to poll from model repository"
        # in its answer (the reason goes to its log): say it here.
        max_batch = int(_number(config.get("max_batch_size")) or 0)
        sizes = serving.dynamic_batching.preferred_batch_sizes if serving.dynamic_batching else []
        too_big = [size for size in sizes if size > max_batch]
        if too_big:
            raise PolicyError(
                f"serving.dynamicBatching.preferredBatchSizes {too_big} exceed model "
                f"{config.get('name', '')!r}'s max_batch_size {max_batch}: use sizes up to "
                f"{max_batch}" + (" or none (the model does not batch)" if max_batch == 0 else "")
            )
        existing = result.get("dynamic_batching")
        batching = dict(existing) if isinstance(existing, Mapping) else {}
        batching.update(_dynamic_batching(serving))
        result["dynamic_batching"] = batching
    if serving.instance_count is not None:
        groups = result.get("instance_group") or [{}]
        result["instance_group"] = [
            {**dict(group), "count": serving.instance_count} for group in groups
        ]
    return result


def _number(value: Any) -> Any:
    # Triton writes some 64-bit integers as JSON strings.
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    if isinstance(value, list):
        return [_number(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _number(v) for k, v in value.items()}
    return value


def differences(config: Mapping[str, Any], serving: Serving) -> list[str]:
    """What in `config` (as a server reports it) differs from the policy; empty when the
    policy is in force."""
    found: list[str] = []
    if serving.uses_dynamic_batcher:
        have = config.get("dynamic_batching")
        if not isinstance(have, Mapping):
            return ["dynamic_batching is not set"]
        for key, want in _dynamic_batching(serving).items():
            got = _number(have.get(key))
            if key == "priority_queue_policy":
                got = {k: v for k, v in (got or {}).items() if k in want}
            if got != want:
                found.append(f"dynamic_batching.{key} is {got!r}, want {want!r}")
    if serving.instance_count is not None:
        counts = [_number(g.get("count")) for g in config.get("instance_group") or []]
        if not counts or any(count != serving.instance_count for count in counts):
            found.append(f"instance_group counts are {counts}, want {serving.instance_count}")
    return found
