"""Install paths a user takes: the samples, the Helm chart, manifests/install.yaml and the
operator image. Rendering uses the real pinned helm binary (built by `make cluster-tools`);
without it these tests fail, they never skip."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
from typing import Any

import kubernetes_validate
import pytest
import yaml

from harness import topology
from modelscale.api import crd
from modelscale.api.v1alpha1 import ModelDeployment
from modelscale.resources import deployment

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "modelscale"
INSTALL = ROOT / "manifests" / "install.yaml"
SAMPLES = sorted((ROOT / "manifests" / "samples").glob("*.yaml"))


def helm() -> str:
    path = os.environ.get("HELM") or str(topology.bin_dir() / "helm")
    assert os.access(path, os.X_OK), f"helm not found at {path}: run `make cluster-tools`"
    return path


def template(*values: str) -> list[dict[str, Any]]:
    args = [helm(), "template", "modelscale", str(CHART), "--namespace", "modelscale-system"]
    args += ["--kube-version", "1.34.0"]
    for value in values:
        args += ["--set", value]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def find(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    return [
        d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)
    ]


def installed() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(INSTALL.read_text()) if doc]


# --------------------------------------------------------------------------- samples


def sample(path: pathlib.Path) -> tuple[ModelDeployment, list[dict[str, Any]]]:
    """The sample's ModelDeployment and the other objects it ships (its model ConfigMap)."""
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    (md,) = [d for d in docs if d["kind"] == "ModelDeployment"]
    return ModelDeployment.model_validate(md), [d for d in docs if d is not md]


@pytest.mark.parametrize("path", [pytest.param(p, id=p.stem) for p in SAMPLES])
def test_sample_is_a_valid_modeldeployment_that_builds_valid_pods(path: pathlib.Path) -> None:
    md, others = sample(path)
    built = deployment.build(md, replicas=md.spec.min_replicas)
    kubernetes_validate.validate(built, "1.34", strict=True)
    for obj in others:
        kubernetes_validate.validate(obj, "1.34", strict=True)
        assert obj["metadata"]["namespace"] == md.namespace


@pytest.mark.parametrize(
    ("name", "files"),
    [
        pytest.param("cpu-toy", ["toy_llm/config.pbtxt", "toy_llm/1/model.py"], id="toy"),
        pytest.param(
            "vllm-llama",
            ["llama-3.1-8b-instruct/config.pbtxt", "llama-3.1-8b-instruct/1/model.json"],
            id="vllm",
        ),
    ],
)
def test_sample_ships_its_model_repository_as_a_configmap(name: str, files: list[str]) -> None:
    """On a real cluster the stock Triton image has no /models: the sample mounts one, file
    by file from its own ConfigMap, in the layout Triton's backend expects."""
    md, others = sample(ROOT / "manifests" / "samples" / f"{name}.yaml")
    (cm,) = [o for o in others if o["kind"] == "ConfigMap"]
    pod = deployment.build(md, replicas=1)["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = [m for m in pod["containers"][0]["volumeMounts"] if "subPath" in m]
    assert {volumes[m["name"]]["configMap"]["name"] for m in mounts} == {cm["metadata"]["name"]}
    repository = md.spec.model.repository
    assert sorted(m["mountPath"] for m in mounts) == sorted(f"{repository}/{f}" for f in files)
    assert sorted(m["subPath"] for m in mounts) == sorted(cm["data"])
    assert files[0].split("/")[0] == md.spec.model.name


def test_vllm_sample_repository_is_what_the_vllm_backend_reads() -> None:
    _, others = sample(ROOT / "manifests" / "samples" / "vllm-llama.yaml")
    (cm,) = [o for o in others if o["kind"] == "ConfigMap"]
    engine = json.loads(cm["data"]["model.json"])
    assert engine["model"] and engine["disable_log_stats"] is False
    config = cm["data"]["config.pbtxt"]
    assert 'backend: "vllm"' in config
    # Without it the vLLM backend publishes no vllm:* metrics and the autoscaler sees no load.
    assert 'key: "REPORT_CUSTOM_METRICS"' in config and 'string_value: "true"' in config


def test_toy_sample_configmap_is_the_model_the_harness_runs() -> None:
    _, others = sample(ROOT / "manifests" / "samples" / "cpu-toy.yaml")
    (cm,) = [o for o in others if o["kind"] == "ConfigMap"]
    model = ROOT / "e2e" / "models" / "toy_llm"
    assert cm["data"] == {
        "config.pbtxt": (model / "config.pbtxt").read_text(),
        "model.py": (model / "1" / "model.py").read_text(),
    }, "manifests/samples/cpu-toy.yaml is stale: run `make manifests`"


@pytest.mark.parametrize(
    ("name", "backend", "gpu_limit"),
    [
        pytest.param("vllm-llama", "vllm", "1", id="vllm-on-a-gpu"),
        pytest.param("cpu-toy", "python", None, id="toy-on-cpu"),
    ],
)
def test_samples_cover_a_gpu_vllm_model_and_a_cpu_model(
    name: str, backend: str, gpu_limit: str | None
) -> None:
    md, _ = sample(ROOT / "manifests" / "samples" / f"{name}.yaml")
    assert md.spec.model.backend == backend
    container = deployment.build(md, replicas=1)["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"].get("limits", {}).get("nvidia.com/gpu") == gpu_limit
    assert "tritonserver" in md.spec.server.image


# --------------------------------------------------------------------------- chart


@pytest.mark.parametrize(
    "values",
    [
        pytest.param([], id="defaults"),
        pytest.param(
            ["watchNamespaces={team-a,team-b}", "serviceMonitor.enabled=true"], id="scoped"
        ),
    ],
)
def test_helm_lint_is_clean(values: list[str]) -> None:
    args = [helm(), "lint", "--strict", str(CHART)]
    for value in values:
        args += ["--set", value]
    result = subprocess.run(args, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[WARNING]" not in result.stdout and "[ERROR]" not in result.stdout


def test_chart_renders_only_valid_kubernetes_1_34_objects() -> None:
    for doc in template():
        kubernetes_validate.validate(doc, "1.34", strict=True)


def operator_container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (dep,) = find(docs, "Deployment")
    result: dict[str, Any] = dep["spec"]["template"]["spec"]["containers"][0]
    return result


LEADER_ARGS = [
    "--leader-election",
    "--leader-lease-name=modelscale-leader",
    "--leader-lease-namespace=modelscale-system",
    "--leader-lease-duration=8",
    "--leader-renew-deadline=6",
    "--leader-retry-period=2",
]


@pytest.mark.parametrize(
    ("values", "args"),
    [
        pytest.param(
            [],
            [
                "run",
                "--all-namespaces",
                "--metrics-port=8080",
                "--health-port=8081",
                "--prometheus-url=http://prometheus-operated.monitoring.svc:9090",
                "--autoscale-interval=15",
                "--resync-interval=60",
                "--kube-qps=50",
                "--kube-burst=100",
                "--resync-qps=10",
                "--log-level=info",
                *LEADER_ARGS,
            ],
            id="all-namespaces",
        ),
        pytest.param(
            [
                "watchNamespaces={team-a,team-b}",
                "logLevel=debug",
                "prometheus.url=http://p:9090",
                "autoscaler.intervalSeconds=5",
                "kubeApi.qps=30",
            ],
            [
                "run",
                "--namespace=team-a",
                "--namespace=team-b",
                "--metrics-port=8080",
                "--health-port=8081",
                "--prometheus-url=http://p:9090",
                "--autoscale-interval=5",
                "--resync-interval=60",
                "--kube-qps=30",
                "--kube-burst=100",
                "--resync-qps=10",
                "--log-level=debug",
                *LEADER_ARGS,
            ],
            id="two-namespaces",
        ),
    ],
)
def test_operator_command_line(values: list[str], args: list[str]) -> None:
    container = operator_container(template(*values))
    assert container["command"] == ["modelscale"]
    assert container["args"] == args


def test_operator_runs_non_root_on_a_read_only_root_filesystem() -> None:
    docs = template()
    (dep,) = find(docs, "Deployment")
    pod = dep["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    container = operator_container(docs)
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    # Two replicas, one leader (a Lease): a rollout may overlap old and new pods.
    assert dep["spec"]["replicas"] == 2
    assert dep["spec"]["strategy"]["type"] == "RollingUpdate"
    assert "--leader-election" in container["args"]


def rules(docs: list[dict[str, Any]], name: str) -> set[tuple[str, str, str]]:
    (role,) = find(docs, "ClusterRole", name)
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


@pytest.mark.parametrize(
    ("group", "resource", "verb", "allowed"),
    [
        pytest.param("modelscale.dev", "modeldeployments", "watch", True, id="watch-md"),
        pytest.param("modelscale.dev", "modeldeployments/status", "patch", True, id="write-status"),
        pytest.param("modelscale.dev", "modeldeployments", "update", False, id="never-write-spec"),
        pytest.param("apps", "deployments", "patch", True, id="apply-deployments"),
        pytest.param("", "services", "patch", True, id="apply-services"),
        pytest.param("policy", "poddisruptionbudgets", "patch", True, id="apply-pdbs"),
        pytest.param("", "pods/status", "patch", True, id="warmed-up-condition"),
        pytest.param("", "pods", "delete", True, id="replace-failed-pod"),
        pytest.param("", "events", "create", True, id="core-events"),
        pytest.param("events.k8s.io", "events", "create", False, id="events-api-unused"),
        pytest.param("modelscale.dev", "modeldeployments", "patch", False, id="no-md-patch"),
        pytest.param("modelscale.dev", "modeldeployments/status", "update", False, id="no-put"),
        pytest.param(
            "modelscale.dev", "modeldeployments/finalizers", "update", True, id="block-owner"
        ),
        pytest.param("", "services", "delete", False, id="children-gc-by-owner"),
        # Each ModelDeployment's Triton control key: read and written by name, never listed.
        pytest.param("", "secrets", "get", True, id="control-key-secret"),
        pytest.param("", "secrets", "list", False, id="never-list-secrets"),
        pytest.param("", "secrets", "watch", False, id="never-watch-secrets"),
        pytest.param("*", "*", "*", False, id="no-wildcards"),
    ],
)
def test_rbac_is_least_privilege(group: str, resource: str, verb: str, allowed: bool) -> None:
    granted = rules(template(), "modelscale") | rules(template(), "modelscale-cluster")
    assert ((group, resource, verb) in granted) is allowed
    assert not any("*" in rule for rule in granted)


def test_leader_election_may_touch_only_its_own_lease() -> None:
    """The Lease Role is namespaced to the release and `update` names the one Lease; with
    leader election off (one replica) there is no Role at all."""
    docs = template()
    (role,) = find(docs, "Role", "modelscale-leader-election")
    assert role["metadata"]["namespace"] == "modelscale-system"
    named = [r for r in role["rules"] if r.get("resourceNames")]
    assert named == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["modelscale-leader"],
            "verbs": ["get", "update"],
        }
    ]
    assert "--leader-lease-name=modelscale-leader" in operator_container(docs)["args"]
    single = template("leaderElection.enabled=false", "replicas=1")
    assert find(single, "Role") == []
    assert "--leader-election" not in operator_container(single)["args"]


@pytest.mark.parametrize(
    ("values", "cluster_wide", "role_binding_namespaces"),
    [
        pytest.param([], True, [], id="all-namespaces"),
        pytest.param(["watchNamespaces={team-a,team-b}"], False, ["team-a", "team-b"], id="scoped"),
    ],
)
def test_watched_namespaces_decide_where_the_operator_role_is_bound(
    values: list[str], cluster_wide: bool, role_binding_namespaces: list[str]
) -> None:
    docs = template(*values)
    bindings = find(docs, "ClusterRoleBinding")
    assert any(b["roleRef"]["name"] == "modelscale" for b in bindings) is cluster_wide
    # (the leader-election Role and RoleBinding, in the release namespace, hold only the Lease)
    assert [
        b["metadata"]["namespace"]
        for b in find(docs, "RoleBinding")
        if not b["metadata"]["name"].endswith("-leader-election")
    ] == role_binding_namespaces
    # CRDs stay listable cluster-wide in both modes (kopf watches them).
    assert any(b["roleRef"]["name"] == "modelscale-cluster" for b in bindings)
    # Namespaced: a Role per namespace with the same rules, nothing namespaced cluster-wide.
    # (the leader-election Role, in the release namespace, holds only the Lease)
    roles = [
        r for r in find(docs, "Role") if not r["metadata"]["name"].endswith("-leader-election")
    ]
    assert [r["metadata"]["namespace"] for r in roles] == role_binding_namespaces
    assert all(b["roleRef"]["kind"] == "Role" for b in find(docs, "RoleBinding"))
    assert bool(find(docs, "ClusterRole", "modelscale")) is cluster_wide
    if roles:
        assert roles[0]["rules"] == find(template(), "ClusterRole", "modelscale")[0]["rules"]


@pytest.mark.parametrize(("enabled", "count"), [(True, 1), (False, 0)], ids=["on", "off"])
def test_service_monitor_is_optional(enabled: bool, count: int) -> None:
    docs = template(f"serviceMonitor.enabled={str(enabled).lower()}")
    assert len(find(docs, "ServiceMonitor")) == count


# --------------------------------------------------------------------------- install.yaml


def test_install_yaml_equals_a_fresh_render() -> None:
    fresh = subprocess.run(
        ["bash", str(ROOT / "charts" / "render-manifests.sh"), "-"],
        env={**os.environ, "HELM": helm()},
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert INSTALL.read_text() == fresh, "manifests/install.yaml is stale: run `make manifests`"


def test_install_yaml_holds_namespace_crd_and_operator() -> None:
    docs = installed()
    assert docs[0]["kind"] == "Namespace"
    assert docs[0]["metadata"]["name"] == "modelscale-system"
    (crd_doc,) = find(docs, "CustomResourceDefinition")
    generated = yaml.safe_load(crd.render())
    assert crd_doc["spec"] == generated["spec"]
    assert crd_doc["metadata"]["name"] == generated["metadata"]["name"]
    assert {d["metadata"].get("namespace") for d in find(docs, "Deployment")} == {
        "modelscale-system"
    }
    for doc in docs:
        kubernetes_validate.validate(doc, "1.34", strict=True)


# --------------------------------------------------------------------------- image


def test_dockerfile_runs_the_cli_as_a_numeric_non_root_user() -> None:
    lines = [line.strip() for line in (ROOT / "Dockerfile").read_text().splitlines()]
    final_stage = lines[max(i for i, line in enumerate(lines) if line.startswith("FROM ")) :]
    user = [line.split()[1] for line in final_stage if line.startswith("USER ")]
    assert user and user[-1].split(":")[0].isdigit() and user[-1].split(":")[0] != "0"
    assert 'ENTRYPOINT ["modelscale"]' in final_stage
