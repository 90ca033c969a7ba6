"""The one table of invalid ModelDeployment specs, shared by every suite that checks refusals:
the parser's (tests/unit/api), the CRD's on the real apiserver (tests/integration) and the
installed operator's (e2e). Each row says what a user reads from each of them: the words of
the apiserver's refusal (`kubectl apply`) and of the operator's parser (pydantic).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from modelscale.api import v1alpha1


@dataclass(frozen=True)
class InvalidSpec:
    id: str
    spec: dict[str, Any]
    apiserver: str  # in the apiserver's message (kubectl apply's stderr)
    parser: str  # in str(ValidationError) of ModelDeployment.model_validate
    smoke: bool = False  # also run by the e2e suite against the installed operator


def _same(id_: str, spec: dict[str, Any], message: str, *, smoke: bool = False) -> InvalidSpec:
    """A cross-field rule: the CEL message and the parser's are one constant."""
    return InvalidSpec(id_, spec, apiserver=message, parser=message, smoke=smoke)


def _quantity(id_: str, spec: dict[str, Any], field: str) -> InvalidSpec:
    return InvalidSpec(id_, spec, apiserver=f"{field}: Invalid value", parser=v1alpha1.MSG_QUANTITY)


def _bound(id_: str, spec: dict[str, Any], words: str, *, smoke: bool = False) -> InvalidSpec:
    """A schema bound: the apiserver says "should be WORDS", pydantic "WORDS"."""
    return InvalidSpec(id_, spec, apiserver=f"should be {words}", parser=words, smoke=smoke)


def _unknown(id_: str, spec: dict[str, Any], field: str) -> InvalidSpec:
    """A field the schema does not have (a typo, an old name)."""
    return InvalidSpec(
        id_, spec, apiserver=f'unknown field "{field}"', parser="Extra inputs are not permitted"
    )


def _pattern(id_: str, spec: dict[str, Any], field: str) -> InvalidSpec:
    return InvalidSpec(id_, spec, apiserver=f"{field} in body should match", parser="should match")


TABLE: tuple[InvalidSpec, ...] = (
    _same("min-over-max", {"minReplicas": 5, "maxReplicas": 2}, v1alpha1.MSG_MIN_MAX, smoke=True),
    _same("replicas-over-max", {"replicas": 20, "maxReplicas": 4}, v1alpha1.MSG_REPLICAS_BOUNDS),
    _same("replicas-under-min", {"replicas": 0, "minReplicas": 1}, v1alpha1.MSG_REPLICAS_BOUNDS),
    _bound("negative-gpus", {"server": {"gpus": -1}}, "greater than or equal to 0", smoke=True),
    InvalidSpec(
        "unknown-mode",
        {"scaling": {"mode": "Sometimes"}},
        apiserver='Unsupported value: "Sometimes"',
        parser="'Predictive', 'RecommendOnly' or 'External'",
        smoke=True,
    ),
    _bound(
        "zero-slo",
        {"scaling": {"targets": {"latencySLO": {"p99Seconds": 0}}}},
        "greater than or equal to 0.001",
    ),
    _bound(
        "headroom-over-1", {"scaling": {"targets": {"headroom": 1.5}}}, "less than or equal to 1"
    ),
    # 5e-324 planned for no capacity at all: OverflowError in the policy.
    _bound(
        "headroom-tiny",
        {"scaling": {"targets": {"headroom": 5e-324}}},
        "greater than or equal to 0.01",
    ),
    _bound(
        "negative-capacity",
        {"scaling": {"targets": {"tokensPerSecondPerReplica": -3}}},
        "greater than or equal to 0.001",
    ),
    _same(
        "floor-without-replicas",
        {"scaling": {"onMissingMetrics": {"behavior": "Floor"}}},
        v1alpha1.MSG_FLOOR,
    ),
    _same(
        "warm-up-without-inputs", {"warmUp": {"autoGenerate": False}}, v1alpha1.MSG_WARMUP_INPUTS
    ),
    _same(
        "stable-n-over-count",
        {"warmUp": {"count": 2, "success": {"stableLastN": 3}}},
        v1alpha1.MSG_STABLE_N,
    ),
    _same("bad-percent", {"disruption": {"maxUnavailable": "half"}}, v1alpha1.MSG_MAX_UNAVAILABLE),
    _same(
        "negative-unavailable", {"disruption": {"maxUnavailable": -1}}, v1alpha1.MSG_MAX_UNAVAILABLE
    ),
    _same(
        "drain-over-grace",
        {"server": {"drainSeconds": 60, "terminationGracePeriodSeconds": 30}},
        v1alpha1.MSG_DRAIN,
    ),
    InvalidSpec(
        "unknown-anti-affinity",
        {"placement": {"antiAffinity": "Always"}},
        apiserver='Unsupported value: "Always"',
        parser="'Preferred', 'Required' or 'None'",
    ),
    InvalidSpec("missing-repository", {"model": {"name": "m"}}, "Required value", "repository"),
    _unknown("typo-field", {"server": {"gpu": 2}}, "spec.server.gpu"),
    _unknown(
        "old-behaviour-spelling",
        {"scaling": {"onMissingMetrics": {"behaviour": "Hold"}}},
        "spec.scaling.onMissingMetrics.behaviour",
    ),
    _unknown(
        "old-stabilization-name",
        {"scaling": {"scaleDown": {"stabilizationSeconds": 60}}},
        "spec.scaling.scaleDown.stabilizationSeconds",
    ),
    _quantity(
        "memory-not-a-quantity",
        {"server": {"resources": {"requests": {"memory": "lots"}}}},
        "spec.server.resources.requests.memory",
    ),
    _quantity(
        "cpu-with-words",
        {"server": {"resources": {"limits": {"cpu": "4 cores"}}}},
        "spec.server.resources.limits.cpu",
    ),
    _quantity(
        "negative-cpu",
        {"server": {"resources": {"requests": {"cpu": -1}}}},
        "spec.server.resources.requests.cpu",
    ),
    _quantity(
        "negative-memory-string",
        {"server": {"resources": {"limits": {"memory": "-1Gi"}}}},
        "spec.server.resources.limits.memory",
    ),
    InvalidSpec("gpus-string", {"server": {"gpus": "1"}}, "gpus: Invalid value", "valid integer"),
    _same(
        "requests-over-limits",
        {"server": {"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1500m"}}}},
        v1alpha1.MSG_REQUESTS_OVER_LIMITS,
    ),
    _same(
        "env-value-and-value-from",
        {
            "server": {
                "env": [{"name": "T", "value": "x", "valueFrom": {"fieldRef": {"fieldPath": "a"}}}]
            }
        },
        v1alpha1.MSG_ENV_VALUE,
    ),
    _same(
        "node-selector-bad-key",
        {"server": {"nodeSelector": {"gpu type": "a100"}}},
        v1alpha1.MSG_LABEL_KEYS,
    ),
    _pattern(
        "node-selector-value-with-space",
        {"server": {"nodeSelector": {"gpu": "a 100"}}},
        "spec.server.nodeSelector.gpu",
    ),
    _pattern(
        "topology-key-with-space",
        {"placement": {"topologyKey": "zone name"}},
        "spec.placement.topologyKey",
    ),
    _pattern(
        "gpu-resource-without-domain",
        {"server": {"gpuResourceName": "gpu"}},
        "spec.server.gpuResourceName",
    ),
    _pattern("shm-size-not-a-quantity", {"server": {"shmSize": "big"}}, "spec.server.shmSize"),
    _same(
        "scale-to-zero-predictive",
        {"minReplicas": 0, "scaling": {"mode": "Predictive"}},
        v1alpha1.MSG_SCALE_TO_ZERO,
        smoke=True,
    ),
    # spec.serving (issue 13): Triton's batcher and queues do not apply to continuous-batching
    # backends; levels referenced must exist.
    _same(
        "queue-policy-on-vllm",
        {"serving": {"queue": {"maxQueueSize": 4}}},
        v1alpha1.MSG_CONTINUOUS_BATCHING,
    ),
    _same(
        "default-level-out-of-range",
        {
            "model": {"name": "toy_llm", "repository": "/models", "backend": "python"},
            "serving": {"priorities": {"levels": 2, "defaultLevel": 3}},
        },
        v1alpha1.MSG_DEFAULT_LEVEL,
    ),
    _same(
        "queue-of-missing-level",
        {
            "model": {"name": "toy_llm", "repository": "/models", "backend": "python"},
            "serving": {"priorities": {"levels": 2, "defaultLevel": 1, "queues": [{"level": 3}]}},
        },
        v1alpha1.MSG_QUEUE_LEVEL,
    ),
    InvalidSpec(
        "unknown-timeout-action",
        {
            "model": {"name": "toy_llm", "repository": "/models", "backend": "python"},
            "serving": {"queue": {"timeoutAction": "DROP"}},
        },
        apiserver='Unsupported value: "DROP"',
        parser="'REJECT' or 'DELAY'",
    ),
)


def rows(*, smoke_only: bool = False) -> list[Any]:
    """The table as `pytest.param(row, id=row.id)`, for `parametrize("row", rows())`."""
    return [pytest.param(row, id=row.id) for row in TABLE if row.smoke or not smoke_only]
