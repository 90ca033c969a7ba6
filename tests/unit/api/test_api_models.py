"""The ModelDeployment models: what a user writes is accepted with working defaults, and a
bad spec is refused with a message the user can act on."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from pydantic import ValidationError

from harness import invalid_specs
from modelscale.api import v1alpha1
from modelscale.api.v1alpha1 import ModelDeployment, ModelDeploymentSpec


def body(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "modelscale.dev/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "llama", "namespace": "serving", "uid": "u-1", "generation": 3},
        "spec": {"model": {"name": "llama", "repository": "s3://models"}, **spec},
    }


class FrozenMapping(Mapping[str, Any]):
    """Stands in for kopf.Body: a read-only Mapping whose nested dicts are Mappings too."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> Any:
        value = self._data[key]
        return FrozenMapping(value) if isinstance(value, dict) else value

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


def test_minimal_spec_gets_defaults_for_a_vllm_triton_on_one_gpu() -> None:
    md = ModelDeployment.model_validate(body())
    spec = md.spec
    assert (md.name, md.namespace, md.metadata.generation) == ("llama", "serving", 3)
    assert spec.model.backend == "vllm"
    assert "vllm" in spec.server.image and "tritonserver" in spec.server.image
    assert (spec.server.gpus, spec.server.gpu_resource_name) == (1, "nvidia.com/gpu")
    assert (spec.min_replicas, spec.max_replicas, spec.replicas) == (1, 10, None)
    assert spec.scaling.mode == "Predictive"
    assert spec.scaling.targets.latency_slo.signal == "TimeToFirstToken"
    assert spec.scaling.targets.headroom == 0.8
    assert (
        spec.scaling.scale_down.stabilization_window_seconds,
        spec.scaling.scale_down.max_step,
    ) == (
        180.0,
        1,
    )
    assert spec.scaling.on_missing_metrics.behavior == "Hold"
    assert spec.warm_up.enabled and spec.warm_up.auto_generate and spec.warm_up.count == 8
    assert spec.placement.anti_affinity == "Preferred" and spec.placement.spread_across_zones
    assert spec.disruption.max_unavailable == 1
    assert md.status is None


def test_a_kopf_body_like_mapping_with_extra_metadata_is_accepted() -> None:
    raw = body()
    raw["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    raw["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    raw["status"] = {"replicas": 2, "kopf": {"progress": {}}, "conditions": []}
    md = ModelDeployment.model_validate(FrozenMapping(raw))
    assert md.metadata.uid == "u-1"
    assert md.status is not None and md.status.replicas == 2


def test_snake_case_names_work_in_python_and_camel_case_is_written_out() -> None:
    spec = ModelDeploymentSpec.model_validate(
        {"model": {"name": "m", "repository": "/models"}, "min_replicas": 2, "maxReplicas": 4}
    )
    out = v1alpha1.to_api(spec)
    assert (out["minReplicas"], out["maxReplicas"]) == (2, 4)
    assert "replicas" not in out  # None is never written
    assert out["scaling"]["targets"]["latencySLO"]["p99Seconds"] == 2.0
    assert ModelDeploymentSpec.model_validate(out) == spec


@pytest.mark.parametrize("row", invalid_specs.rows())
def test_invalid_spec_is_refused_with_a_readable_message(row: invalid_specs.InvalidSpec) -> None:
    with pytest.raises(ValidationError) as err:
        ModelDeployment.model_validate(body(**row.spec))
    assert row.parser in str(err.value)


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param(
            {"minReplicas": 0, "maxReplicas": 1, "scaling": {"mode": "External"}},
            id="scale-to-zero-external",
        ),
        pytest.param(
            {"replicas": 3, "minReplicas": 1, "maxReplicas": 3, "scaling": {"mode": "External"}},
            id="external-at-max",
        ),
        pytest.param({"server": {"gpus": 0, "image": "tritonserver:cpu"}}, id="cpu-only"),
        pytest.param({"disruption": {"maxUnavailable": "25%"}}, id="percent-unavailable"),
        pytest.param({"disruption": {"maxUnavailable": 0}}, id="no-voluntary-disruption"),
        pytest.param(
            {"scaling": {"onMissingMetrics": {"behavior": "Floor", "floorReplicas": 2}}},
            id="floor",
        ),
        pytest.param({"warmUp": {"enabled": False, "autoGenerate": False}}, id="warmup-disabled"),
        pytest.param(
            {
                "warmUp": {
                    "autoGenerate": False,
                    "requests": [
                        {
                            "inputs": {
                                "text_input": {"datatype": "BYTES", "shape": [1], "data": ["hi"]}
                            },
                            "parameters": {"max_tokens": 16},
                        }
                    ],
                }
            },
            id="explicit-warmup-request",
        ),
        pytest.param(
            {
                "server": {
                    "env": [
                        {
                            "name": "HF_TOKEN",
                            "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}},
                        }
                    ],
                    "podTemplate": {
                        "volumes": [
                            {"name": "m", "persistentVolumeClaim": {"claimName": "models"}}
                        ],
                        "volumeMounts": [{"name": "m", "mountPath": "/models"}],
                        "runtimeClassName": "nvidia",
                    },
                }
            },
            id="env-secret-and-pvc",
        ),
    ],
)
def test_valid_spec_is_accepted(spec: dict[str, Any]) -> None:
    ModelDeployment.model_validate(body(**spec))


@pytest.mark.parametrize(
    ("ts", "text"),
    [
        pytest.param(0.0, "1970-01-01T00:00:00Z", id="epoch"),
        pytest.param(1_800_000_000.0, "2027-01-15T08:00:00Z", id="2027"),
    ],
)
def test_status_times_are_rfc3339(ts: float, text: str) -> None:
    assert v1alpha1.to_rfc3339(ts) == text
    assert v1alpha1.from_rfc3339(text) == ts


def test_status_round_trips_with_free_form_policy_state() -> None:
    status = v1alpha1.ModelDeploymentStatus.model_validate(
        {
            "observedGeneration": 2,
            "replicas": 3,
            "selector": "modelscale.dev/modeldeployment=llama",
            "conditions": [{"type": "Available", "status": "True", "reason": "Warmed"}],
            "autoscaling": {
                "currentTokenRate": 812.5,
                "decisions": [{"time": "2026-01-01T00:00:00Z", "replicas": 3, "reason": "Up"}],
                "state": {"holt": {"level": 1.0, "trend": [0.1, 0.2]}},
            },
        }
    )
    out = v1alpha1.to_api(status)
    assert out["autoscaling"]["state"] == {"holt": {"level": 1.0, "trend": [0.1, 0.2]}}
    assert out["conditions"][0] == {
        "type": "Available",
        "status": "True",
        "reason": "Warmed",
        "message": "",
    }


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        pytest.param(4, "4", id="int-cores"),
        pytest.param("4", "4", id="string-cores"),
        pytest.param("500m", "500m", id="millicores"),
        pytest.param("1.5", "1.5", id="decimal"),
        pytest.param("32Gi", "32Gi", id="binary-suffix"),
        pytest.param("1G", "1G", id="decimal-suffix"),
        pytest.param("1e3", "1e3", id="exponent"),
        pytest.param(".5", ".5", id="leading-dot"),
    ],
)
def test_cpu_and_memory_accept_what_kubernetes_accepts(given: object, stored: str) -> None:
    spec = ModelDeployment.model_validate(
        body(server={"resources": {"requests": {"cpu": given, "memory": given}}})
    ).spec
    assert (spec.server.resources.requests.cpu, spec.server.resources.requests.memory) == (
        stored,
        stored,
    )


def test_hpa_names_for_the_scaling_windows() -> None:
    spec = ModelDeployment.model_validate(
        body(
            scaling={
                "scaleUp": {"stabilizationWindowSeconds": 15},
                "scaleDown": {"stabilizationWindowSeconds": 600},
                "onMissingMetrics": {"behavior": "Floor", "floorReplicas": 2},
            }
        )
    ).spec
    assert spec.scaling.scale_up.stabilization_window_seconds == 15
    assert spec.scaling.scale_down.stabilization_window_seconds == 600
    assert spec.scaling.on_missing_metrics.behavior == "Floor"


def test_a_length_aware_ttft_slo_reaches_the_policy_and_needs_the_ttft_signal() -> None:
    from modelscale.control.scaling import policy_config  # noqa: PLC0415

    slo = {"p99Seconds": 2.0, "perThousandPromptTokensSeconds": 0.5}
    md = ModelDeployment.model_validate(body(scaling={"targets": {"latencySLO": slo}}))
    assert policy_config(md.spec).ttft_slo_per_1k_prompt_seconds == 0.5
    e2e = {**slo, "signal": "EndToEnd"}
    with pytest.raises(ValidationError) as err:
        ModelDeployment.model_validate(body(scaling={"targets": {"latencySLO": e2e}}))
    assert "applies to signal TimeToFirstToken only" in str(err.value)
