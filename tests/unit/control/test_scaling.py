"""From the spec and what Prometheus said to the policy's inputs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from modelscale.api.v1alpha1 import ModelDeployment, to_api
from modelscale.autoscaling.types import Decision, Recommendation, ScalingState
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


def _md_with(autoscaling: dict[str, Any]) -> ModelDeployment:
    return ModelDeployment.model_validate(
        {
            "metadata": {"name": "llama", "namespace": "llm"},
            "spec": {"model": {"name": "m", "repository": "s3://b"}},
            "status": {"autoscaling": autoscaling},
        }
    )


_DECISIONS = [{"time": "2027-01-15T08:00:00Z", "replicas": 3, "reason": "ForecastTokenRate"}]
_MODEL = {"fc": {"h": {"l": 812.5}}}


@pytest.mark.parametrize(
    ("autoscaling", "model", "decisions"),
    [
        pytest.param(
            {"learnedState": json.dumps({"lastScaleTime": 1.8e9, "model": _MODEL}),
             "decisions": _DECISIONS},
            _MODEL, 1, id="learned-state-text",
        ),
        pytest.param(
            {"state": {"lastScaleTime": 1.8e9, "model": _MODEL,
                       "decisions": [{"time": 1.8e9, "replicas": 3, "reason": "Up"}]}},
            _MODEL, 1, id="old-nested-map-upgrade",
        ),
        pytest.param({"learnedState": "{not json", "decisions": _DECISIONS}, {}, 0, id="nonsense"),
        pytest.param({}, {}, 0, id="empty"),
    ],
)  # fmt: skip
def test_previous_state_reads_both_forms(
    autoscaling: dict[str, Any], model: dict[str, Any], decisions: int
) -> None:
    state = scaling.previous_state(_md_with(autoscaling))
    assert state.model == model
    assert len(state.decisions) == decisions


def test_learned_state_is_one_compact_string_and_round_trips() -> None:
    m = _md_with({})
    obs = scaling.observation(
        m, signals=Signals(), pods=[], current_replicas=1, measured_horizon=None, now=1.8e9
    )
    rec = Recommendation(replicas=2, reason="ForecastTokenRate", message="up")
    state = ScalingState(
        last_scale_time=1.8e9,
        decisions=(Decision(time=1.8e9, replicas=2, reason="ForecastTokenRate"),),
        model=_MODEL,
    )
    out = to_api(
        scaling.status(m, obs=obs, rec=rec, state=state, desired=2, now=1.8e9),
        patch=True,
    )["autoscaling"]
    assert out["state"] is None  # the old nested map is removed on upgrade
    assert isinstance(out["learnedState"], str) and "\n" not in out["learnedState"]
    assert "decisions" not in json.loads(out["learnedState"])  # shown once, in `decisions`
    back = scaling.previous_state(_md_with({k: v for k, v in out.items() if v is not None}))
    assert (back.model, back.last_scale_time) == (_MODEL, 1.8e9)
    assert [(d.replicas, d.reason) for d in back.decisions] == [(2, "ForecastTokenRate")]
