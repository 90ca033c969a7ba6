"""The operator end to end on the local cluster: installed by helm, a ModelDeployment of
the toy Triton model becomes Available on distinct GPU nodes, hand edits are repaired,
bad specs are refused by the apiserver with the CEL message, and deletion cleans up."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from toy_md import modeldeployment_body, toy_model, toy_server

from harness import invalid_specs
from harness.kubectl import Kubectl, wait_until

pytestmark = pytest.mark.cluster


def modeldeployment(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "model": toy_model("python"),
        "server": toy_server({"TOY_LLM_LOAD_DELAY_S": "0.5"}),
        "minReplicas": 1,
        "maxReplicas": 4,
        "warmUp": {
            "count": 4,
            "concurrency": 2,
            "success": {"stableLastN": 2, "maxLatencyFactor": 3},
        },
    }
    for key, value in spec.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            base[key] = {**base[key], **value}
        else:
            base[key] = value
    return modeldeployment_body(name, namespace, base)


@pytest.fixture(scope="module")
def ns(kubectl: Kubectl) -> Iterator[str]:
    with kubectl.namespace("op") as name:
        yield name


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next(
        (c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == type_), None
    )


def is_available(kubectl: Kubectl, ns: str, name: str) -> bool:
    cond = condition(kubectl.json("-n", ns, "get", "mdep", name), "Available")
    return cond is not None and cond["status"] == "True"


@pytest.fixture(scope="module")
def served(operator: str, kubectl: Kubectl, ns: str) -> str:
    """Two replicas (External mode pins the count) that must not share a node."""
    name = "toy"
    kubectl.apply(
        modeldeployment(
            name,
            ns,
            replicas=2,
            scaling={"mode": "External"},
            placement={"antiAffinity": "Required"},
        )
    )
    wait_until(
        lambda: is_available(kubectl, ns, name),
        timeout=240,
        what=f"ModelDeployment {ns}/{name} Available",
    )
    wait_until(
        lambda: kubectl.json("-n", ns, "get", "mdep", name)["status"].get("readyReplicas") == 2,
        timeout=180,
        what="2 ready replicas",
    )
    return name


def pods_of(kubectl: Kubectl, ns: str, name: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = kubectl.json(
        "-n", ns, "get", "pods", "-l", f"modelscale.dev/modeldeployment={name}"
    )["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def test_helm_install_runs_the_operator(operator: str, kubectl: Kubectl) -> None:
    pods = kubectl.json("-n", operator, "get", "pods")["items"]
    assert pods, "the chart created no operator pod"
    ready = [p for p in pods if condition(p, "Ready") and condition(p, "Ready")["status"] == "True"]  # type: ignore[index]
    assert ready, f"operator pod not Ready: {[p['status'] for p in pods]}"


@pytest.mark.parametrize("row", invalid_specs.rows(smoke_only=True))
def test_invalid_spec_is_refused_at_apply_time(
    operator: str, kubectl: Kubectl, ns: str, row: invalid_specs.InvalidSpec
) -> None:
    proc = kubectl.apply(modeldeployment("bad", ns, **row.spec), check=False)
    assert proc.returncode != 0
    assert row.apiserver in proc.stderr


def test_available_on_distinct_gpu_nodes(kubectl: Kubectl, ns: str, served: str) -> None:
    pods = pods_of(kubectl, ns, served)
    assert len({p["spec"]["nodeName"] for p in pods}) == 2
    for pod in pods:
        triton = pod["spec"]["containers"][0]
        assert triton["resources"]["limits"]["nvidia.com/gpu"] == "1"
        assert {"conditionType": "modelscale.dev/warmed-up"} in pod["spec"]["readinessGates"]
    svc = kubectl.json("-n", ns, "get", "service", served)
    pdb = kubectl.json("-n", ns, "get", "pdb", served)
    for child in (svc, pdb):
        assert child["metadata"]["ownerReferences"][0]["kind"] == "ModelDeployment"
    want = {p["status"]["podIP"] for p in pods}

    def ready_ips() -> set[str]:
        slices = kubectl.json(
            "-n", ns, "get", "endpointslices", "-l", f"kubernetes.io/service-name={served}"
        )
        return {
            a
            for s in slices["items"]
            for e in s.get("endpoints") or []
            if (e.get("conditions") or {}).get("ready")
            for a in e["addresses"]
        }

    # The EndpointSlice controller follows pod readiness a moment later (its own watch).
    wait_until(lambda: ready_ips() == want, timeout=30, what=f"ready endpoints {want}")


def test_printer_columns(kubectl: Kubectl, ns: str, served: str) -> None:
    out = kubectl.run("-n", ns, "get", "mdep", served).stdout
    header = out.splitlines()[0].split()
    for column in ("READY", "WARMED", "REPLICAS", "DESIRED", "P99", "SLO", "MODE", "REASON"):
        assert column in header, out
    row = out.splitlines()[1].split()
    assert "External" in row
    assert row[header.index("READY")] == "True", out


def test_kubectl_wait_for_ready(kubectl: Kubectl, ns: str, served: str) -> None:
    kubectl.run("-n", ns, "wait", "--for=condition=Ready", f"mdep/{served}", "--timeout=60s")


def test_children_created_events_posted_once(kubectl: Kubectl, ns: str, served: str) -> None:
    events = kubectl.json(
        "-n", ns, "get", "events", "--field-selector", "involvedObject.kind=ModelDeployment"
    )["items"]
    reasons = [e["reason"] for e in events if e["involvedObject"]["name"] == served]
    for reason in ("ServiceCreated", "PodDisruptionBudgetCreated"):
        assert reasons.count(reason) == 1, reasons


def test_operator_leaves_the_users_object_alone(kubectl: Kubectl, ns: str, served: str) -> None:
    """What a GitOps tool compares (metadata and spec) is exactly what the user applied."""
    obj = kubectl.json("-n", ns, "get", "mdep", served)
    assert obj["metadata"]["generation"] == 1
    assert not obj["metadata"].get("finalizers")
    annotations = obj["metadata"].get("annotations") or {}
    assert [k for k in annotations if "kopf" in k or "modelscale" in k] == []


def test_hand_edited_deployment_is_restored(kubectl: Kubectl, ns: str, served: str) -> None:
    kubectl.run(
        "-n",
        ns,
        "patch",
        "deployment",
        served,
        "--type=json",
        "-p",
        '[{"op":"replace","path":"/spec/template/spec/terminationGracePeriodSeconds","value":99},'
        '{"op":"replace","path":"/spec/replicas","value":3}]',
    )

    def restored() -> bool:
        dep = kubectl.json("-n", ns, "get", "deployment", served)
        return bool(
            dep["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 10
            and dep["spec"]["replicas"] == 2
        )

    wait_until(restored, timeout=90, what="the operator to restore the Deployment")


def test_scale_subresource_drives_external_mode(kubectl: Kubectl, ns: str, served: str) -> None:
    kubectl.run("-n", ns, "scale", "mdep", served, "--replicas=3")
    wait_until(
        lambda: kubectl.json("-n", ns, "get", "deployment", served)["spec"]["replicas"] == 3,
        timeout=60,
        what="the Deployment to follow kubectl scale",
    )
    # Required anti-affinity over 3 nodes: the third replica fits on the third node.
    wait_until(
        lambda: kubectl.json("-n", ns, "get", "mdep", served)["status"].get("readyReplicas") == 3,
        timeout=180,
        what="3 ready replicas",
    )
    kubectl.run("-n", ns, "scale", "mdep", served, "--replicas=2")


def test_deleting_the_modeldeployment_removes_its_children(
    kubectl: Kubectl, ns: str, served: str
) -> None:
    kubectl.run("-n", ns, "delete", "mdep", served, "--wait=true", "--timeout=60s")

    def gone() -> bool:
        for kind in ("deployment", "service", "pdb"):
            proc = kubectl.run("-n", ns, "get", kind, served, check=False)
            if proc.returncode == 0:
                return False
        return True

    wait_until(gone, timeout=90, what="garbage collection of the Deployment, Service and PDB")
