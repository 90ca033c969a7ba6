"""The chart's values contract, its CRD, monitors and dashboard, and `make image`, rendered
with the real pinned helm (never skipped: without helm these tests fail)."""

from __future__ import annotations

import copy
import json
import os
import pathlib
import re
import subprocess
from typing import Any

import jsonschema
import pytest
import yaml

from harness import monitors, topology
from modelscale.api import crd
from modelscale.api.v1alpha1 import ModelDeployment
from modelscale.resources import deployment, names

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "modelscale"
DASHBOARD = CHART / "dashboards" / "modelscale.json"


def helm() -> str:
    path = os.environ.get("HELM") or str(topology.bin_dir() / "helm")
    assert os.access(path, os.X_OK), f"helm not found at {path}: run `make cluster-tools`"
    return path


def helm_template(*values: str) -> subprocess.CompletedProcess[str]:
    args = [helm(), "template", "modelscale", str(CHART), "--namespace", "modelscale-system"]
    args += ["--kube-version", "1.34.0"]
    for value in values:
        args += ["--set", value]
    return subprocess.run(args, capture_output=True, text=True, check=False)


def template(*values: str) -> list[dict[str, Any]]:
    proc = helm_template(*values)
    assert proc.returncode == 0, proc.stderr
    return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]


def find(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


# --------------------------------------------------------------------------- values


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param(
            "autoscaler.intervalSeconds=fast",
            "at '/autoscaler/intervalSeconds': got string, want number",
            id="interval-not-a-number",
        ),
        pytest.param("autoscaler.intervalSeconds=0", "/autoscaler/intervalSeconds", id="zero"),
        pytest.param(
            "autoscaler.interval=5",
            "additional properties 'interval' not allowed",
            id="misspelt-key",
        ),
        pytest.param("logLevel=verbose", "/logLevel", id="unknown-log-level"),
        pytest.param("metrics.port=70000", "/metrics/port", id="port-out-of-range"),
        pytest.param("image.pullPolicy=Sometimes", "/image/pullPolicy", id="pull-policy"),
        pytest.param("prometheus.url=prometheus:9090", "/prometheus/url", id="url-no-scheme"),
        pytest.param("serviceMonitor.interval=30", "/serviceMonitor/interval", id="bad-duration"),
        pytest.param("watchNamespaces={Team_A}", "/watchNamespaces/0", id="bad-namespace"),
        pytest.param("crds.install=maybe", "/crds/install", id="not-a-bool"),
        pytest.param("extraEnv[0].value=x", "missing property 'name'", id="env-without-name"),
        pytest.param("mallocArenaMax=0", "/mallocArenaMax", id="no-arenas"),
    ],
)
def test_schema_refuses_a_bad_value_at_template_time(value: str, message: str) -> None:
    proc = helm_template(value)
    assert proc.returncode != 0, f"{value} rendered"
    assert "values don't meet the specifications of the schema" in proc.stderr
    assert message in proc.stderr


@pytest.mark.parametrize(
    "value",
    [
        "autoscaler.intervalSeconds=5",
        "logLevel=DEBUG",
        "prometheus.url=https://prom.example.com:9090/prefix",
        "watchNamespaces={team-a,team-b}",
        "imagePullSecrets[0].name=regcred",
        "podMonitor.interval=1m30s",
        "tolerations[0].operator=Exists",
        "mallocArenaMax=null",
    ],
)
def test_schema_accepts_good_values(value: str) -> None:
    assert helm_template(value).returncode == 0


def leaf_paths(values: dict[str, Any], prefix: str = "") -> list[str]:
    out = []
    for key, value in values.items():
        path = f"{prefix}{key}"
        # Maps the user fills in (labels, resources, securityContext...) are one value.
        if isinstance(value, dict) and value and path not in OPAQUE:
            out += leaf_paths(value, f"{path}.")
        else:
            out.append(path)
    return out


OPAQUE = {
    "podSecurityContext",
    "securityContext",
    "resources",
    "grafanaDashboard.labels",
}


def test_readme_and_schema_cover_every_value() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    readme = (CHART / "README.md").read_text()
    schema = json.loads((CHART / "values.schema.json").read_text())
    documented = set(re.findall(r"^\| `([^`]+)` \|", readme, flags=re.M))
    paths = leaf_paths(values)
    assert sorted(set(paths) - documented) == [], "values missing from charts/modelscale/README.md"
    assert sorted(documented - set(paths)) == [], "README lists values the chart does not have"
    for path in paths:
        node = schema
        for part in path.split("."):
            assert part in node.get("properties", {}), f"{path} is not in values.schema.json"
            node = node["properties"][part]
    # The defaults themselves satisfy the schema.
    jsonschema.validate(values, schema)


# --------------------------------------------------------------------------- CRD


def test_crd_is_a_template_upgraded_with_the_release_and_kept_on_uninstall() -> None:
    (rendered,) = find(template(), "CustomResourceDefinition")
    generated = yaml.safe_load(crd.render())
    assert rendered["spec"] == generated["spec"]
    assert rendered["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
    assert not (CHART / "crds").exists(), "crds/ is installed once and never upgraded by Helm"


@pytest.mark.parametrize(
    ("values", "count", "annotations"),
    [
        pytest.param(["crds.keep=false"], 1, None, id="not-kept"),
        pytest.param(["crds.install=false"], 0, None, id="managed-elsewhere"),
    ],
)
def test_crd_values(values: list[str], count: int, annotations: dict[str, str] | None) -> None:
    crds = find(template(*values), "CustomResourceDefinition")
    assert len(crds) == count
    for doc in crds:
        assert doc["metadata"].get("annotations") == annotations


# --------------------------------------------------------------------------- monitors


def strict(schema: Any) -> Any:
    """A CRD's structural schema as JSON Schema that refuses unknown fields, as the
    apiserver's strict field validation does."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items() if not k.startswith("x-kubernetes-")}
        if "properties" in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
            out.setdefault("additionalProperties", False)
        if schema.get("x-kubernetes-int-or-string"):
            out["type"] = ["integer", "string"]
        return out
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


@pytest.fixture(scope="module")
def monitor_schemas() -> dict[str, Any]:
    """prometheus-operator's own CRDs, from its Go module (the Go module proxy)."""
    out = {}
    for kind, path in monitors.prometheus_operator_crds().items():
        doc = yaml.safe_load(path.read_text())
        (version,) = [v for v in doc["spec"]["versions"] if v["name"] == "v1"]
        schema = copy.deepcopy(version["schema"]["openAPIV3Schema"])
        schema["properties"]["metadata"] = {"type": "object"}
        out[kind] = strict(schema)
    return out


@pytest.mark.parametrize("kind", ["PodMonitor", "ServiceMonitor"])
def test_monitors_are_off_by_default(kind: str) -> None:
    assert find(template(), kind) == []


@pytest.mark.parametrize(
    "values",
    [
        pytest.param([], id="all-namespaces"),
        pytest.param(["watchNamespaces={team-a,team-b}"], id="scoped"),
    ],
)
def test_monitors_validate_against_the_prometheus_operator_schema(
    monitor_schemas: dict[str, Any], values: list[str]
) -> None:
    docs = template("podMonitor.enabled=true", "serviceMonitor.enabled=true", *values)
    for kind, schema in monitor_schemas.items():
        (doc,) = find(docs, kind)
        assert doc["apiVersion"] == "monitoring.coreos.com/v1"
        jsonschema.validate(doc, schema)


def test_a_misspelt_monitor_field_fails_the_schema_check(monitor_schemas: dict[str, Any]) -> None:
    (doc,) = find(template("podMonitor.enabled=true"), "PodMonitor")
    doc["spec"]["podMetricsEndpoints"][0]["intervall"] = "15s"
    with pytest.raises(jsonschema.ValidationError, match="intervall"):
        jsonschema.validate(doc, monitor_schemas["PodMonitor"])


def test_pod_monitor_scrapes_the_triton_pods_metrics_port() -> None:
    (pm,) = find(template("podMonitor.enabled=true"), "PodMonitor")
    md = ModelDeployment.model_validate(
        {"metadata": {"name": "x"}, "spec": {"model": {"name": "m", "repository": "/m"}}}
    )
    pod = deployment.build(md, replicas=1)["spec"]["template"]
    selector = pm["spec"]["selector"]["matchLabels"]
    assert selector.items() <= pod["metadata"]["labels"].items()
    (endpoint,) = pm["spec"]["podMetricsEndpoints"]
    ports = {p["name"]: p["containerPort"] for p in pod["spec"]["containers"][0]["ports"]}
    assert ports[endpoint["port"]] == names.PORTS["metrics"]
    assert pm["spec"]["namespaceSelector"] == {"any": True}
    # The label the autoscaler's queries and the dashboard group by.
    (relabel,) = endpoint["relabelings"]
    assert relabel["targetLabel"] == "modeldeployment"
    assert relabel["sourceLabels"] == [
        "__meta_kubernetes_pod_label_" + re.sub(r"[^a-zA-Z0-9_]", "_", names.LABEL_MODELDEPLOYMENT)
    ]


def test_scoped_pod_monitor_looks_only_in_the_watched_namespaces() -> None:
    (pm,) = find(template("podMonitor.enabled=true", "watchNamespaces={a,b}"), "PodMonitor")
    assert pm["spec"]["namespaceSelector"] == {"matchNames": ["a", "b"]}


def test_service_monitor_scrapes_the_operator_service_and_keeps_its_labels() -> None:
    docs = template("serviceMonitor.enabled=true", "serviceMonitor.labels.release=kps")
    (sm,) = find(docs, "ServiceMonitor")
    (svc,) = find(docs, "Service")
    assert sm["metadata"]["labels"]["release"] == "kps"
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    (endpoint,) = sm["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in svc["spec"]["ports"]}
    # The operator's series carry the ModelDeployment's namespace label: keep it.
    assert endpoint["honorLabels"] is True


# --------------------------------------------------------------------------- dashboard


def test_dashboard_configmap_is_off_by_default_and_carries_the_sidecar_label() -> None:
    assert find(template(), "ConfigMap") == []
    (cm,) = find(template("grafanaDashboard.enabled=true"), "ConfigMap")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["metadata"]["namespace"] == "modelscale-system"
    assert json.loads(cm["data"]["modelscale.json"]) == json.loads(DASHBOARD.read_text())
    (moved,) = find(
        template("grafanaDashboard.enabled=true", "grafanaDashboard.namespace=monitoring"),
        "ConfigMap",
    )
    assert moved["metadata"]["namespace"] == "monitoring"


def dashboard() -> dict[str, Any]:
    board: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return board


@pytest.mark.parametrize(
    "topic",
    [
        "modelscale_autoscaler_forecast_token_rate",  # forecast
        "vllm:generation_tokens_total",  # load
        "modelscale_autoscaler_recommended_replicas",  # replicas
        "vllm:e2e_request_latency_seconds_bucket",  # P99 ...
        "$slo",  # ... vs SLO
        "modelscale_autoscaler_decisions_total",  # decisions by reason
        "modelscale_pod_seconds_to_warm_bucket",  # warm-up times
    ],
)
def test_dashboard_shows_what_the_issue_asks_for(topic: str) -> None:
    exprs = [t["expr"] for p in dashboard()["panels"] for t in p["targets"]]
    assert any(topic in e for e in exprs)


def test_dashboard_uses_only_metrics_someone_exports() -> None:
    """Operator metrics must exist in the operator's source (prometheus_client adds
    _total / _bucket); the others are Triton's or the vLLM backend's."""
    source = "\n".join(p.read_text() for p in (ROOT / "operator" / "modelscale").rglob("*.py"))
    toy = (ROOT / "e2e" / "models" / "toy_llm" / "1" / "model.py").read_text()
    exprs = [t["expr"] for p in dashboard()["panels"] for t in p["targets"]]
    for expr in exprs:
        for metric in re.findall(r"\b((?:modelscale|vllm|nv)_?:?[a-z_:]+)\b", expr):
            if metric.startswith("modelscale_"):
                base = re.sub(r"_(total|bucket|sum|count)$", "", metric)
                assert f'"{base}"' in source, f"{metric}: the operator exports no {base}"
            elif metric.startswith("vllm:"):
                base = re.sub(r"_(total|bucket|sum|count)$", "", metric)
                assert base in toy, f"{metric}: not a vLLM backend metric the toy mirrors"
            else:
                assert metric in {"nv_inference_request_success"}, metric


def test_dashboard_panels_all_use_the_datasource_variable() -> None:
    board = dashboard()
    variables = {v["name"] for v in board["templating"]["list"]}
    assert {"datasource", "namespace", "modeldeployment", "slo"} <= variables
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    for panel in board["panels"]:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"], panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs)), panel["title"]


# --------------------------------------------------------------------------- make image


def make_image(path: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", "image", *extra],
        cwd=ROOT,
        env={**os.environ, "PATH": path},
        capture_output=True,
        text=True,
        check=False,
    )


def test_make_image_says_in_one_line_that_no_builder_exists(tmp_path: pathlib.Path) -> None:
    proc = make_image(os.environ["PATH"], "IMAGE_BUILDERS=no-such-builder another-one")
    assert proc.returncode != 0
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("make image:")]
    assert "no-such-builder: not on PATH" in line and "install podman or buildah" in line


def test_make_image_builds_with_the_first_builder_found(tmp_path: pathlib.Path) -> None:
    # podman and buildah are not installed here: a stand-in records how it is called.
    fake = tmp_path / "podman"
    fake.write_text(f'#!/bin/sh\necho "$PWD $*" > {tmp_path}/called\n')
    fake.chmod(0o755)
    proc = make_image(
        f"{tmp_path}:{os.environ['PATH']}", "IMAGE_BUILDERS=podman buildah", "IMAGE=reg/op:1"
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "called").read_text() == f"{ROOT} build -t reg/op:1 .\n"


def _operator_env(*values: str) -> dict[str, Any]:
    (dep,) = [d for d in find(template(*values), "Deployment")]
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_operator_runs_with_two_malloc_arenas_and_the_extra_env() -> None:
    env = _operator_env("extraEnv[0].name=PYTHONTRACEMALLOC", "extraEnv[0].value=a")
    assert env["MALLOC_ARENA_MAX"] == "2"
    assert env["PYTHONTRACEMALLOC"] == "a"
    assert "POD_NAME" in env  # the chart's own entries stay
    assert "MALLOC_ARENA_MAX" not in _operator_env("mallocArenaMax=null")
