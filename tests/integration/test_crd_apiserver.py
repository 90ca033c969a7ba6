"""The generated CRD on the real kube-apiserver: it is accepted, fills in the same defaults
the operator assumes, refuses bad specs at apply time with the message a user reads, and
serves the scale and status subresources and the printer columns."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from harness import invalid_specs
from harness.kubectl import Kubectl, wait_until
from modelscale.api import v1alpha1
from modelscale.api.v1alpha1 import ModelDeployment

pytestmark = pytest.mark.cluster

CRD_NAME = "modeldeployments.modelscale.dev"


def md(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": v1alpha1.API_VERSION,
        "kind": v1alpha1.KIND,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"model": {"name": "toy_llm", "repository": "/models"}, **spec},
    }


def test_crd_is_established_with_its_names(installed: None, kubectl: Kubectl) -> None:
    obj = kubectl.json("get", "crd", CRD_NAME)
    conditions = {c["type"]: c["status"] for c in obj["status"]["conditions"]}
    assert conditions["Established"] == "True"
    assert conditions["NamesAccepted"] == "True"
    assert obj["status"]["acceptedNames"]["shortNames"] == ["mdep"]
    assert obj["status"]["acceptedNames"]["categories"] == ["modelscale", "ai"]


def test_apiserver_fills_in_the_defaults_the_operator_assumes(
    installed: None, kubectl: Kubectl, namespace: str
) -> None:
    kubectl.apply(md("minimal", namespace))
    stored = kubectl.json("-n", namespace, "get", "mdep", "minimal")
    assert stored["spec"]["scaling"]["mode"] == "Predictive"
    assert stored["spec"]["server"]["gpus"] == 1
    assert stored["spec"]["warmUp"]["success"]["stableLastN"] == 3
    assert ModelDeployment.model_validate(stored).spec == (
        ModelDeployment.model_validate(md("minimal", namespace)).spec
    )


@pytest.mark.parametrize("row", invalid_specs.rows())
def test_invalid_spec_is_refused_at_apply_time_with_a_readable_message(
    installed: None, kubectl: Kubectl, namespace: str, row: invalid_specs.InvalidSpec
) -> None:
    proc = kubectl.apply(md("bad", namespace, **row.spec), check=False)
    assert proc.returncode != 0, f"accepted: {row.spec}"
    assert row.apiserver in proc.stderr
    # ... and the operator's own parser refuses it too (a cross-field rule in the same words).
    with pytest.raises(ValidationError, match=re.escape(row.parser)):
        ModelDeployment.model_validate(md("bad", namespace, **row.spec))


@pytest.mark.parametrize(
    ("field", "words"),
    [
        pytest.param("spec.minReplicas", "Fewest replicas", id="minReplicas"),
        pytest.param("spec.maxReplicas", "GPU budget", id="maxReplicas"),
        pytest.param(
            "spec.scaling.onMissingMetrics.behavior", "keeps the current replicas", id="behavior"
        ),
        pytest.param(
            "spec.scaling.scaleDown.stabilizationWindowSeconds",
            "highest recommendation",
            id="stabilizationWindowSeconds",
        ),
    ],
)
def test_kubectl_explain_describes_the_fields(
    installed: None, kubectl: Kubectl, field: str, words: str
) -> None:
    # The apiserver publishes a new CRD's OpenAPI a moment after it is Established.
    out = wait_until(
        lambda: kubectl.run("explain", f"modeldeployments.{field}", check=False).stdout,
        timeout=30,
        what=f"kubectl explain modeldeployments.{field}",
    )
    assert words in " ".join(out.split())


def test_cpu_and_memory_are_int_or_string_quantities(
    installed: None, kubectl: Kubectl, namespace: str
) -> None:
    resources = {"requests": {"cpu": 4, "memory": "32Gi"}, "limits": {"cpu": "4500m"}}
    kubectl.apply(md("quantities", namespace, server={"resources": resources}))
    stored = kubectl.json("-n", namespace, "get", "mdep", "quantities")
    assert stored["spec"]["server"]["resources"]["requests"] == {"cpu": 4, "memory": "32Gi"}
    parsed = ModelDeployment.model_validate(stored).spec.server.resources
    assert (parsed.requests.cpu, parsed.limits.cpu) == ("4", "4500m")


def test_scale_subresource_and_status(installed: None, kubectl: Kubectl, namespace: str) -> None:
    kubectl.apply(md("scaled", namespace, maxReplicas=4, scaling={"mode": "External"}))
    kubectl.run("-n", namespace, "scale", "mdep", "scaled", "--replicas=3")
    assert kubectl.json("-n", namespace, "get", "mdep", "scaled")["spec"]["replicas"] == 3
    refused = kubectl.run("-n", namespace, "scale", "mdep", "scaled", "--replicas=9", check=False)
    assert refused.returncode != 0 and v1alpha1.MSG_REPLICAS_BOUNDS in refused.stderr

    status = {
        "replicas": 2,
        "readyReplicas": 1,
        "desiredReplicas": 3,
        "selector": "modelscale.dev/modeldeployment=scaled",
        "conditions": [{"type": "Ready", "status": "True", "reason": "ReplicasWarmed"}],
        "autoscaling": {
            "currentTokenRate": 812.5,
            "currentP99Seconds": 0.42,
            "reason": "ForecastTokenRate",
            "state": {"a": [1]},
        },
        "kopf": {"progress": {"h": {"retries": 1}}},
    }
    kubectl.run(
        "-n",
        namespace,
        "patch",
        "mdep",
        "scaled",
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": status}),
    )
    scale = json.loads(
        kubectl.run(
            "get",
            "--raw",
            f"/apis/modelscale.dev/v1alpha1/namespaces/{namespace}/modeldeployments/scaled/scale",
        ).stdout
    )
    assert scale["spec"]["replicas"] == 3
    assert scale["status"] == {"replicas": 2, "selector": "modelscale.dev/modeldeployment=scaled"}
    stored = kubectl.json("-n", namespace, "get", "mdep", "scaled")["status"]
    # Free-form fields survive pruning: the policy's state and kopf's bookkeeping.
    assert stored["autoscaling"]["state"] == {"a": [1]}
    assert stored["kopf"] == {"progress": {"h": {"retries": 1}}}

    table = wait_until(
        lambda: kubectl.run("-n", namespace, "get", "mdep", "scaled").stdout,
        timeout=10,
        what="kubectl get mdep",
    )
    header, row = table.splitlines()[:2]
    assert header.split() == [
        "NAME",
        "READY",
        "WARMED",
        "REPLICAS",
        "DESIRED",
        "TOKENS/S",
        "P99",
        "SLO",
        "MODE",
        "REASON",
        "AGE",
    ]
    assert row.split()[:10] == [
        "scaled",
        "True",
        "1",
        "2",
        "3",
        "812.5",
        "0.42",
        "2",
        "External",
        "ForecastTokenRate",
    ]


def test_samples_are_accepted(installed: None, kubectl: Kubectl, namespace: str) -> None:
    for path in sorted(
        (Path(__file__).resolve().parents[2] / "manifests" / "samples").glob("*.yaml")
    ):
        # A sample may ship its model repository as a ConfigMap next to the ModelDeployment.
        for obj in (doc for doc in yaml.safe_load_all(path.read_text()) if doc):
            obj["metadata"]["namespace"] = namespace
            proc = kubectl.run(
                "apply", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump(obj), check=False
            )
            assert proc.returncode == 0, f"{path.name}: {proc.stderr}"
