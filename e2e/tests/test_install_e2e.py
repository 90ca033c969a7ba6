"""Installs that work outside the harness, checked on the local cluster with the operator
installed by helm:

- `helm upgrade` to a chart whose CRD changed changes the CRD in the cluster;
- the CPU sample (its model repository shipped as a ConfigMap) becomes Available, and
  `modelscale render -f` of the same file prints exactly what the operator applied;
- the chart's PodMonitor and ServiceMonitor are accepted by the apiserver under the
  prometheus-operator CRDs (strict field validation: a misspelt field fails);
- every query of the Grafana dashboard returns data from the real Prometheus while a toy
  ModelDeployment serves load and the autoscaler runs.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from toy_md import modeldeployment_body, toy_model, toy_server

from harness import loadgen
from harness.kubectl import Kubectl, wait_until
from harness.monitors import prometheus_operator_crds
from modelscale.api import crd

pytestmark = pytest.mark.cluster

REPO = pathlib.Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "modelscale"
DASHBOARD = CHART / "dashboards" / "modelscale.json"
SAMPLE = REPO / "manifests" / "samples" / "cpu-toy.yaml"
CRD_NAME = "modeldeployments.modelscale.dev"
RELEASE, OPERATOR_NAMESPACE = "modelscale", "modelscale-system"


def helm(cluster: Any, *args: str) -> subprocess.CompletedProcess[str]:
    base = [str(cluster.bin_dir / "helm"), "--kubeconfig", str(cluster.kubeconfig)]
    proc = subprocess.run(
        [*base, "-n", OPERATOR_NAMESPACE, *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert proc.returncode == 0, f"helm {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


def live_crd_spec(kubectl: Kubectl) -> dict[str, Any]:
    spec: dict[str, Any] = kubectl.json("get", "crd", CRD_NAME)["spec"]
    spec.pop("conversion", None)  # defaulted by the apiserver ({strategy: None})
    return spec


# --------------------------------------------------------------------------- CRD upgrade


def test_helm_upgrade_upgrades_the_crd(
    operator: str, cluster: Any, kubectl: Kubectl, tmp_path: pathlib.Path
) -> None:
    generated = yaml.safe_load(crd.render())["spec"]
    assert live_crd_spec(kubectl)["versions"] == generated["versions"]
    # The next chart version: the same chart with one CRD field description changed.
    chart = tmp_path / "modelscale"
    shutil.copytree(CHART, chart)
    crd_file = chart / "files" / "crds" / f"{CRD_NAME}.yaml"
    changed = yaml.safe_load(crd_file.read_text())
    marker = "changed by the next chart version"
    changed["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"] = marker
    crd_file.write_text(yaml.safe_dump(changed, sort_keys=False))
    try:
        helm(cluster, "upgrade", RELEASE, str(chart), "--reuse-values", "--wait")
        schema = live_crd_spec(kubectl)["versions"][0]["schema"]["openAPIV3Schema"]
        assert schema["description"] == marker
    finally:
        helm(cluster, "upgrade", RELEASE, str(CHART), "--reuse-values", "--wait")
    assert live_crd_spec(kubectl)["versions"] == generated["versions"]
    annotations = kubectl.json("get", "crd", CRD_NAME)["metadata"]["annotations"]
    assert annotations["helm.sh/resource-policy"] == "keep"


def test_a_second_release_is_told_how_to_share_the_crd(cluster: Any, operator: str) -> None:
    """The CRD belongs to the installed release: another one (or a kubectl-applied CRD)
    stops at install time with what to do, instead of Helm's ownership error."""
    proc = subprocess.run(
        [
            str(cluster.bin_dir / "helm"),
            "--kubeconfig",
            str(cluster.kubeconfig),
            "-n",
            "default",
            "install",
            "second",
            str(CHART),
            "--dry-run=server",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode != 0
    assert f"CRD {CRD_NAME} exists and is not managed by release default/second" in proc.stderr
    assert "--set crds.install=false" in proc.stderr


# --------------------------------------------------------------------------- sample + render


def in_namespace(text: str, namespace: str) -> str:
    docs = [d for d in yaml.safe_load_all(text) if d]
    for doc in docs:
        doc["metadata"]["namespace"] = namespace
    return yaml.safe_dump_all(docs, sort_keys=False)


def is_subset(rendered: Any, live: Any, path: str = "") -> list[str]:
    """Where `live` differs from what was rendered (live may hold apiserver defaults)."""
    if isinstance(rendered, dict):
        if not isinstance(live, dict):
            return [f"{path}: {live!r} is not a mapping"]
        out = []
        for key, value in rendered.items():
            if key not in live:
                out.append(f"{path}.{key}: missing")
            else:
                out += is_subset(value, live[key], f"{path}.{key}")
        return out
    if isinstance(rendered, list):
        if not isinstance(live, list) or len(live) != len(rendered):
            return [f"{path}: {live!r} != {rendered!r}"]
        return [d for i, r in enumerate(rendered) for d in is_subset(r, live[i], f"{path}[{i}]")]
    return [] if rendered == live else [f"{path}: live {live!r} != rendered {rendered!r}"]


def field_paths(fields: dict[str, Any], prefix: str = "") -> set[str]:
    """Mapping paths in a managedFields `fieldsV1` (list items not descended into)."""
    out = set()
    for key, value in fields.items():
        if key.startswith("f:"):
            path = f"{prefix}.{key[2:]}"
            out.add(path)
            if isinstance(value, dict):
                out |= field_paths(value, path)
    return out


# Fields Kubernetes' schemas mark atomic (a LabelSelector; a Service's selector map): one
# entry in managedFields, their keys not listed.
ATOMIC = {".spec.selector"}


def object_paths(obj: dict[str, Any], prefix: str = "") -> set[str]:
    out = set()
    for key, value in obj.items():
        path = f"{prefix}.{key}"
        out.add(path)
        if isinstance(value, dict):
            out |= object_paths(value, path)
    return out


@pytest.fixture(scope="module")
def sample_ns(kubectl: Kubectl) -> Iterator[str]:
    with kubectl.namespace("install") as name:
        yield name


def test_cpu_sample_runs_and_render_prints_what_the_operator_applied(
    operator: str, kubectl: Kubectl, sample_ns: str, tmp_path: pathlib.Path
) -> None:
    manifest = tmp_path / "cpu-toy.yaml"
    manifest.write_text(in_namespace(SAMPLE.read_text(), sample_ns))
    kubectl.run("apply", "-f", str(manifest))
    wait_until(
        lambda: any(
            c["type"] == "Available" and c["status"] == "True"
            for c in (kubectl.json("-n", sample_ns, "get", "mdep", "toy").get("status") or {}).get(
                "conditions", []
            )
        ),
        timeout=240,
        what=f"the cpu-toy sample Available in {sample_ns}",
    )
    proc = subprocess.run(
        [sys.executable, "-m", "modelscale", "render", "-f", str(manifest)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    rendered = [d for d in yaml.safe_load_all(proc.stdout) if d]
    assert [d["kind"] for d in rendered] == ["Deployment", "Service", "PodDisruptionBudget"]
    uid = kubectl.json("-n", sample_ns, "get", "mdep", "toy")["metadata"]["uid"]
    for obj in rendered:
        # The one field only the live ModelDeployment can give: render leaves it out.
        assert "ownerReferences" not in obj["metadata"]
        obj["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "modelscale.dev/v1alpha1",
                "kind": "ModelDeployment",
                "name": "toy",
                "uid": uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        resource = {"Deployment": "deployment", "Service": "service"}.get(obj["kind"], "pdb")
        live = kubectl.json(
            "-n", sample_ns, "get", resource, obj["metadata"]["name"], "--show-managed-fields"
        )
        # Everything rendered is what runs (live objects add apiserver defaults and status).
        assert is_subset(obj, live, obj["kind"]) == []
        # And the operator applied nothing the render did not print: its field manager's
        # fields are exactly the rendered ones.
        (managed,) = [
            m
            for m in live["metadata"]["managedFields"]
            if m["manager"] == "modelscale" and m["operation"] == "Apply"
        ]
        applied = field_paths(managed["fieldsV1"])
        printed = object_paths(obj) - {
            ".apiVersion",
            ".kind",
            ".metadata.name",
            ".metadata.namespace",
        }
        assert applied - printed == set(), f"{obj['kind']}: applied but not rendered"
        # Atomic maps (a Deployment's selector) are one entry in managedFields.
        atomic = [path for path in applied if path in ATOMIC]
        unlisted = {p for p in printed - applied if not any(p.startswith(a + ".") for a in atomic)}
        assert unlisted == set(), f"{obj['kind']}: rendered but not applied"


# --------------------------------------------------------------------------- monitors


def test_pod_and_service_monitors_are_valid_under_the_prometheus_operator_crds(
    cluster: Any, kubectl: Kubectl
) -> None:
    for path in prometheus_operator_crds().values():
        kubectl.run("apply", "--server-side", "-f", str(path))
    for name in ("podmonitors.monitoring.coreos.com", "servicemonitors.monitoring.coreos.com"):
        kubectl.run("wait", "--for=condition=Established", f"crd/{name}", "--timeout=60s")
    out = subprocess.run(
        [
            str(cluster.bin_dir / "helm"),
            "template",
            RELEASE,
            str(CHART),
            "--namespace",
            "default",
            "--kube-version",
            "1.34.0",
            "--set",
            "podMonitor.enabled=true",
            "--set",
            "serviceMonitor.enabled=true",
            "--set",
            "watchNamespaces={default}",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    monitors = [
        d for d in yaml.safe_load_all(out) if d and d["kind"] in ("PodMonitor", "ServiceMonitor")
    ]
    assert sorted(d["kind"] for d in monitors) == ["PodMonitor", "ServiceMonitor"]
    for doc in monitors:
        proc = kubectl.run(
            "apply",
            "--dry-run=server",
            "--validate=strict",
            "-f",
            "-",
            stdin=yaml.safe_dump(doc),
            check=False,
        )
        assert proc.returncode == 0, f"{doc['kind']}: {proc.stderr}"


# --------------------------------------------------------------------------- dashboard


def dashboard_queries() -> list[tuple[str, str]]:
    """(what, PromQL) of every panel target and every query variable of the dashboard."""
    board = json.loads(DASHBOARD.read_text())
    out = [
        (f"{panel['title']} / {target['legendFormat']}", target["expr"])
        for panel in board["panels"]
        for target in panel["targets"]
    ]
    for var in board["templating"]["list"]:
        if var["type"] == "query":
            out.append((f"variable {var['name']}", var["definition"]))
    return out


def substitute(expr: str, *, namespace: str, name: str) -> str:
    """What Grafana sends with the variables set to this test's ModelDeployment."""
    for var, value in (
        ("$__rate_interval", "1m"),
        ("$__range", "15m"),
        ("$namespace", namespace),
        ("$modeldeployment", name),
        ("$slo", "2"),
    ):
        expr = expr.replace(var, value)
    return expr


def prometheus_has_data(prometheus_url: str, expr: str) -> bool:
    label = None
    if expr.startswith("label_values("):
        # Grafana's label_values(SELECTOR, LABEL) asks the series API for LABEL's values.
        selector, label = (x.strip() for x in expr[len("label_values(") : -1].rsplit(",", 1))
        url = f"{prometheus_url}/api/v1/series?" + urllib.parse.urlencode(
            {"match[]": selector, "start": str(time.time() - 900)}
        )
    else:
        url = f"{prometheus_url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as resp:
        body = json.load(resp)
    assert body["status"] == "success", f"{expr}: {body}"
    if label is not None:
        return any(series.get(label) for series in body["data"])
    return bool(body["data"]["result"])


def toy(name: str, namespace: str) -> dict[str, Any]:
    return modeldeployment_body(
        name,
        namespace,
        {
            "model": toy_model("vllm"),
            "server": toy_server({"TOY_LLM_LOAD_DELAY_S": "0.5"}),
            "minReplicas": 1,
            "maxReplicas": 2,
            "scaling": {
                "mode": "Predictive",
                # A trickle of load is "two replicas' worth": the run scales up once.
                "targets": {"tokensPerSecondPerReplica": 20},
                "forecast": {"horizonSeconds": 20},
            },
            "warmUp": {"count": 4, "concurrency": 2, "success": {"stableLastN": 2}},
        },
    )


def test_every_dashboard_query_returns_data(
    operator: str, kubectl: Kubectl, kube_api: Any, namespace: str, prometheus_url: str
) -> None:
    name = "dash"
    kubectl.apply(toy(name, namespace))
    wait_until(
        lambda: loadgen.ready_endpoints_from_slices(kube_api, namespace, name),
        timeout=240,
        what="a warmed toy pod in the Service",
    )
    # 2 requests/s of 16 tokens for 3 minutes at most: ~32 tokens/s, above one replica's 20.
    requests = [
        loadgen.TraceRequest(t_s=i * 0.5, input_tokens=32, output_tokens=16) for i in range(360)
    ]
    queries = dashboard_queries()
    empty: list[str] = []
    with loadgen.EndpointPoller(
        lambda: loadgen.ready_endpoints_from_slices(kube_api, namespace, name), interval_s=0.5
    ) as endpoints:
        replay = loadgen.start_replay(requests, endpoints=endpoints, max_output_tokens=16)
        try:
            deadline = time.monotonic() + 170
            while True:
                empty = [
                    f"{what}: {expr}"
                    for what, expr in queries
                    if not prometheus_has_data(
                        prometheus_url, substitute(expr, namespace=namespace, name=name)
                    )
                ]
                if not empty or time.monotonic() > deadline:
                    break
                time.sleep(5)
        finally:
            replay.stop()
    assert empty == [], "dashboard queries without data:\n" + "\n".join(empty)
