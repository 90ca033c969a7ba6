"""The children a ModelDeployment turns into: what lands in the cluster for a given spec."""

from __future__ import annotations

import copy
import re
from typing import Any

import kubernetes_validate
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import spec_strategies
from modelscale.api.v1alpha1 import ModelDeployment
from modelscale.resources import deployment, names, pdb, service

SELECTOR = {"modelscale.dev/modeldeployment": "llama"}
LABELS = {
    "app.kubernetes.io/name": "modelscale-triton",
    "app.kubernetes.io/instance": "llama",
    "app.kubernetes.io/managed-by": "modelscale",
    "modelscale.dev/modeldeployment": "llama",
}


def md(**spec: Any) -> ModelDeployment:
    return ModelDeployment.model_validate(
        {
            "metadata": {"name": "llama", "namespace": "serving", "uid": "uid-1"},
            "spec": {"model": {"name": "llama3", "repository": "s3://bucket/models"}, **spec},
        }
    )


def pod_spec(m: ModelDeployment) -> dict[str, Any]:
    result: dict[str, Any] = deployment.build(m, replicas=2)["spec"]["template"]["spec"]
    return result


def triton(m: ModelDeployment) -> dict[str, Any]:
    result: dict[str, Any] = pod_spec(m)["containers"][0]
    return result


SPECS = [
    pytest.param({}, id="defaults"),
    pytest.param(
        {"server": {"gpus": 0, "shmSize": None, "drainSeconds": 0}}, id="cpu-no-shm-no-drain"
    ),
    pytest.param(
        {"placement": {"antiAffinity": "Required", "spreadAcrossZones": False}}, id="required"
    ),
    pytest.param({"placement": {"antiAffinity": "None"}}, id="no-anti-affinity"),
    pytest.param({"disruption": {"maxUnavailable": "25%"}}, id="percent-pdb"),
    pytest.param(
        {
            "server": {
                "resources": {
                    "requests": {"cpu": "4", "memory": "32Gi"},
                    "limits": {"memory": "40Gi"},
                },
                "env": [
                    {"name": "A", "value": "1"},
                    {"name": "T", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
                ],
                "nodeSelector": {"gpu": "a100"},
                "tolerations": [
                    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
                ],
                "priorityClassName": "serving",
                "serviceAccountName": "triton",
                "imagePullSecrets": ["ngc"],
                "podTemplate": {
                    "labels": {"team": "ml"},
                    "annotations": {"a": "b"},
                    "volumes": [{"name": "m", "persistentVolumeClaim": {"claimName": "models"}}],
                    "volumeMounts": [{"name": "m", "mountPath": "/models", "readOnly": True}],
                    "securityContext": {"runAsUser": 1000, "fsGroup": 1000},
                    "containerSecurityContext": {"allowPrivilegeEscalation": False},
                    "runtimeClassName": "nvidia",
                },
            }
        },
        id="everything",
    ),
]


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda m: deployment.build(m, replicas=3), id="deployment"),
        pytest.param(service.build, id="service"),
        pytest.param(pdb.build, id="pdb"),
    ],
)
def test_built_objects_are_valid_kubernetes_1_34_objects(spec: dict[str, Any], build: Any) -> None:
    kubernetes_validate.validate(build(md(**spec)), "1.34", strict=True)


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda m: deployment.build(m, replicas=3), id="deployment"),
        pytest.param(service.build, id="service"),
        pytest.param(pdb.build, id="pdb"),
    ],
)
def test_every_child_is_labelled_owned_and_named_after_the_modeldeployment(build: Any) -> None:
    obj = build(md())
    assert obj["metadata"]["name"] == "llama"
    assert obj["metadata"]["namespace"] == "serving"
    assert obj["metadata"]["labels"] == LABELS
    assert obj["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "modelscale.dev/v1alpha1",
            "kind": "ModelDeployment",
            "name": "llama",
            "uid": "uid-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


@pytest.mark.parametrize("spec", SPECS)
def test_builders_are_deterministic_and_do_not_share_state_with_the_spec(
    spec: dict[str, Any],
) -> None:
    m = md(**spec)
    before = m.model_dump()
    first = deployment.build(m, replicas=2)
    mutated = copy.deepcopy(first)
    first["spec"]["template"]["spec"].get("tolerations", [{}])[0]["x"] = 1
    first["spec"]["template"]["spec"].get("volumes", [{}])[-1]["x"] = 1
    assert deployment.build(m, replicas=2) == mutated
    assert m.model_dump() == before


def test_pods_select_by_one_label_and_carry_scrape_annotations_and_the_warm_up_gate() -> None:
    d = deployment.build(md(), replicas=4)
    assert d["spec"]["replicas"] == 4
    assert d["spec"]["selector"] == {"matchLabels": SELECTOR}
    template = d["spec"]["template"]
    assert template["metadata"]["labels"] == LABELS
    assert template["metadata"]["annotations"] == {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": "8002",
        "prometheus.io/path": "/metrics",
    }
    assert template["spec"]["readinessGates"] == [{"conditionType": "modelscale.dev/warmed-up"}]
    assert names.selector_string(md()) == "modelscale.dev/modeldeployment=llama"


def test_pod_template_override_cannot_replace_the_operators_labels_or_annotations() -> None:
    m = md(
        server={
            "podTemplate": {
                "labels": {"modelscale.dev/modeldeployment": "other", "team": "ml"},
                "annotations": {"prometheus.io/port": "9999", "owner": "ml"},
            }
        }
    )
    meta = deployment.build(m, replicas=1)["spec"]["template"]["metadata"]
    assert meta["labels"] == {**LABELS, "team": "ml"}
    assert meta["annotations"]["prometheus.io/port"] == "8002"
    assert meta["annotations"]["owner"] == "ml"


def test_rollouts_surge_one_warm_pod_and_never_remove_capacity_first() -> None:
    strategy = deployment.build(md(), replicas=2)["spec"]["strategy"]
    assert strategy == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }


@pytest.mark.parametrize(
    ("server", "requests", "limits"),
    [
        pytest.param({}, {"nvidia.com/gpu": "1"}, {"nvidia.com/gpu": "1"}, id="default-one-gpu"),
        pytest.param({"gpus": 4}, {"nvidia.com/gpu": "4"}, {"nvidia.com/gpu": "4"}, id="four-gpus"),
        pytest.param({"gpus": 0}, None, None, id="cpu-only"),
        pytest.param(
            {"gpus": 1, "gpuResourceName": "nvidia.com/mig-1g.5gb"},
            {"nvidia.com/mig-1g.5gb": "1"},
            {"nvidia.com/mig-1g.5gb": "1"},
            id="mig-slice",
        ),
        pytest.param(
            {
                "gpus": 2,
                "resources": {
                    "requests": {"cpu": "8", "memory": "64Gi"},
                    "limits": {"memory": "80Gi"},
                },
            },
            {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "2"},
            {"memory": "80Gi", "nvidia.com/gpu": "2"},
            id="cpu-memory-and-gpus",
        ),
        pytest.param(
            {"gpus": 0, "resources": {"limits": {"cpu": "2"}}},
            None,
            {"cpu": "2"},
            id="cpu-limit-only",
        ),
    ],
)
def test_gpu_and_cpu_resources(server: dict[str, Any], requests: Any, limits: Any) -> None:
    resources = triton(md(server=server))["resources"]
    assert resources.get("requests") == requests
    assert resources.get("limits") == limits


@pytest.mark.parametrize(
    ("placement", "expected"),
    [
        pytest.param(
            {"antiAffinity": "Required"},
            {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "labelSelector": {"matchLabels": SELECTOR},
                            "topologyKey": "kubernetes.io/hostname",
                        }
                    ]
                }
            },
            id="required-on-hostname",
        ),
        pytest.param(
            {},
            {
                "podAntiAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 100,
                            "podAffinityTerm": {
                                "labelSelector": {"matchLabels": SELECTOR},
                                "topologyKey": "kubernetes.io/hostname",
                            },
                        }
                    ]
                }
            },
            id="preferred-by-default",
        ),
        pytest.param(
            {"antiAffinity": "Required", "topologyKey": "topology.kubernetes.io/rack"},
            {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "labelSelector": {"matchLabels": SELECTOR},
                            "topologyKey": "topology.kubernetes.io/rack",
                        }
                    ]
                }
            },
            id="required-on-custom-key",
        ),
        pytest.param({"antiAffinity": "None"}, None, id="none"),
    ],
)
def test_anti_affinity(placement: dict[str, Any], expected: Any) -> None:
    assert pod_spec(md(placement=placement)).get("affinity") == expected


@pytest.mark.parametrize(
    ("spread", "expected"),
    [
        pytest.param(
            True,
            [
                {
                    "maxSkew": 1,
                    "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": "ScheduleAnyway",
                    "labelSelector": {"matchLabels": SELECTOR},
                    "matchLabelKeys": ["pod-template-hash"],
                }
            ],
            id="spread-across-zones",
        ),
        pytest.param(False, None, id="no-spread"),
    ],
)
def test_zone_spread(spread: bool, expected: Any) -> None:
    assert (
        pod_spec(md(placement={"spreadAcrossZones": spread})).get("topologySpreadConstraints")
        == expected
    )


@pytest.mark.parametrize(
    ("args", "present", "absent"),
    [
        pytest.param(
            [],
            [
                "--model-repository=s3://bucket/models",
                "--model-control-mode=explicit",
                "--load-model=llama3",
                "--http-port=8000",
                "--grpc-port=8001",
                "--metrics-port=8002",
                "--metrics-config=summary_latencies=true",
                "--exit-timeout-secs=45",
            ],
            [],
            id="defaults",
        ),
        pytest.param(
            ["--log-verbose=1"],
            ["--load-model=llama3", "--log-verbose=1"],
            [],
            id="extra-arg-appended",
        ),
        pytest.param(
            ["--model-control-mode=poll"],
            ["--model-control-mode=poll"],
            ["--model-control-mode=explicit", "--load-model=llama3"],
            id="user-control-mode-replaces-ours",
        ),
        pytest.param(
            ["--exit-timeout-secs=5"],
            ["--exit-timeout-secs=5"],
            ["--exit-timeout-secs=45"],
            id="user-exit-timeout",
        ),
    ],
)
def test_triton_command_line(args: list[str], present: list[str], absent: list[str]) -> None:
    c = triton(md(server={"args": args}))
    assert c["command"] == ["tritonserver"]
    for arg in present:
        assert arg in c["args"]
    for arg in absent:
        assert arg not in c["args"]
    assert c["args"][-len(args) :] == args if args else True


def test_triton_ports_and_health_probes() -> None:
    c = triton(md(server={"startupTimeoutSeconds": 900}))
    assert c["ports"] == [
        {"name": "http", "containerPort": 8000, "protocol": "TCP"},
        {"name": "grpc", "containerPort": 8001, "protocol": "TCP"},
        {"name": "metrics", "containerPort": 8002, "protocol": "TCP"},
    ]
    assert c["startupProbe"]["httpGet"] == {"path": "/v2/health/ready", "port": "http"}
    # The model gets the whole start-up timeout to load before liveness may restart it.
    assert c["startupProbe"]["periodSeconds"] * c["startupProbe"]["failureThreshold"] == 900
    assert c["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert c["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"


@pytest.mark.parametrize(
    ("server", "pre_stop", "grace"),
    [
        pytest.param({}, {"sleep": {"seconds": 10}}, 60, id="default-drain"),
        pytest.param(
            {"drainSeconds": 30, "terminationGracePeriodSeconds": 120},
            {"sleep": {"seconds": 30}},
            120,
            id="long-drain",
        ),
        pytest.param({"drainSeconds": 0}, None, 60, id="no-drain"),
    ],
)
def test_drain_before_stop(server: dict[str, Any], pre_stop: Any, grace: int) -> None:
    m = md(server=server)
    assert triton(m).get("lifecycle", {}).get("preStop") == pre_stop
    assert pod_spec(m)["terminationGracePeriodSeconds"] == grace


@pytest.mark.parametrize(
    ("shm", "volume"),
    [
        pytest.param(
            "1Gi",
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}},
            id="default",
        ),
        pytest.param(
            "8Gi",
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}},
            id="bigger",
        ),
        pytest.param(None, None, id="container-default"),
    ],
)
def test_shared_memory_volume(shm: str | None, volume: Any) -> None:
    m = md(server={"shmSize": shm})
    volumes = pod_spec(m).get("volumes", [])
    assert (volumes[0] if volumes else None) == volume
    mounts = triton(m).get("volumeMounts", [])
    assert ({"name": "dshm", "mountPath": "/dev/shm"} in mounts) == (shm is not None)


def test_scheduling_fields_pass_through() -> None:
    spec = pod_spec(
        md(
            server={
                "nodeSelector": {"gpu": "h100"},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                "priorityClassName": "high",
            }
        )
    )
    assert spec["nodeSelector"] == {"gpu": "h100"}
    assert spec["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    assert spec["priorityClassName"] == "high"
    assert spec["automountServiceAccountToken"] is False


def test_service_exposes_triton_ports_by_name() -> None:
    svc = service.build(md())
    assert svc["spec"]["type"] == "ClusterIP"
    assert svc["spec"]["selector"] == SELECTOR
    assert [(p["name"], p["port"], p["targetPort"]) for p in svc["spec"]["ports"]] == [
        ("http", 8000, "http"),
        ("grpc", 8001, "grpc"),
        ("metrics", 8002, "metrics"),
    ]


@pytest.mark.parametrize(
    ("disruption", "expected"),
    [
        pytest.param({}, 1, id="default-one"),
        pytest.param({"maxUnavailable": 0}, 0, id="zero"),
        pytest.param({"maxUnavailable": "25%"}, "25%", id="percent"),
    ],
)
def test_pdb_max_unavailable(disruption: dict[str, Any], expected: int | str) -> None:
    budget = pdb.build(md(disruption=disruption))
    assert budget["spec"]["maxUnavailable"] == expected
    assert budget["spec"]["selector"] == {"matchLabels": SELECTOR}
    assert budget["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"


@settings(max_examples=100, derandomize=True)
@given(st.lists(spec_strategies.names.filter(lambda n: len(n) <= 63), min_size=2, max_size=5))
def test_every_legal_name_gets_a_service_name_kubernetes_accepts(names_: list[str]) -> None:
    """DNS-1035 (letters, digits, '-', starting with a letter, <= 63) for every
    ModelDeployment name, unchanged when it already is one, distinct for distinct names."""
    services = [names.dns1035_label(n) for n in names_]
    for name, svc in zip(names_, services, strict=True):
        assert re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", svc) and len(svc) <= 63, svc
        if re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", name):
            assert svc == name
    assert len(set(services)) == len(set(names_))
