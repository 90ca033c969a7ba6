"""From the spec and what Prometheus said to the policy's inputs."""

from __future__ import annotations

from typing import Any

import pytest

from modelscale.api.v1alpha1 import ModelDeployment
from modelscale.control import scaling
from modelscale.metrics.promql import Signals

NOW = 1_800_000_000.0


def md(**targets: Any) -> ModelDeployment:
    return ModelDeployment.model_validate(
        {
            "metadata": {"name": "llama", "namespace": "llm"},
            "spec": {
                "model": {"name": "m", "repository": "s3://b"},
                "minReplicas": 2,
                "maxReplicas": 9,
                "scaling": {
                    "targets": targets,
                    "scaleDown": {"stabilizationWindowSeconds": 120, "maxStep": 2},
                },
            },
        }
    )


@pytest.mark.parametrize(
    ("targets", "field", "expected"),
    [
        pytest.param({}, "tpot_slo_seconds", None, id="no-tpot-slo-by-default"),
        pytest.param(
            {"timePerOutputTokenP99Seconds": 0.05}, "tpot_slo_seconds", 0.05, id="tpot-slo"
        ),
        pytest.param(
            {"tokensPerSecondPerReplica": 900},
            "target_tokens_per_replica",
            900.0,
            id="capacity-target",
        ),
        pytest.param({"latencySLO": {"p99Seconds": 1.5}}, "latency_slo_seconds", 1.5, id="slo"),
        pytest.param({}, "scale_down_stabilization_seconds", 120.0, id="scale-down-window"),
        pytest.param({}, "max_scale_down_step", 2, id="scale-down-step"),
        pytest.param({}, "min_replicas", 2, id="min"),
    ],
)
def test_policy_config_follows_the_spec(
    targets: dict[str, Any], field: str, expected: object
) -> None:
    assert getattr(scaling.policy_config(md(**targets).spec), field) == expected


def test_observation_passes_prefill_and_tpot_and_counts_only_serving_pods() -> None:
    obs = scaling.observation(
        md(),
        signals=Signals(
            token_rate=800.0,
            prompt_token_rate=4000.0,
            p99_seconds=0.9,
            queue_depth=2.0,
            sample_time=NOW - 3,
        ),
        pods=[],
        current_replicas=3,
        measured_horizon=42.0,
        now=NOW,
        tpot_p99=0.04,
    )
    assert (obs.token_rate, obs.prompt_token_rate, obs.p99_tpot_seconds) == (800.0, 4000.0, 0.04)
    assert (obs.warmed_replicas, obs.current_replicas, obs.measured_horizon_seconds) == (0, 3, 42.0)
