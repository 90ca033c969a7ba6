"""Applying with what the last apply left (`known`) names the outcome without a read,
against the real apiserver: unchanged, taken back after a hand edit, created again after
a hand delete."""

from __future__ import annotations

import uuid

import pytest
from kubernetes import client
from prometheus_client import REGISTRY

from modelscale.api.v1alpha1 import ModelDeployment
from modelscale.kube import apply as kube_apply
from modelscale.kube import client as kube_client
from modelscale.resources import pdb, service

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def ns(installed: None, module_namespace: str) -> str:
    return module_namespace


def test_known_versions_name_every_outcome_without_a_read(
    kube_api: client.ApiClient, ns: str
) -> None:
    md = ModelDeployment.model_validate(
        {
            "metadata": {"name": "known", "namespace": ns, "uid": str(uuid.uuid4())},
            "spec": {"model": {"name": "toy_llm", "repository": "/models"}},
        }
    )
    desired = service.build(md)
    desired["metadata"].pop("ownerReferences")  # no owner here: the GC would remove it
    first = kube_apply.apply(kube_api, desired)
    assert first.outcome is kube_apply.Outcome.CREATED and first.version is not None

    # Count the requests each apply sends, by the operator client's own counter.
    def gets() -> float:
        labels = {"verb": "get", "resource": "services"}
        return REGISTRY.get_sample_value("modelscale_kube_requests_total", labels) or 0.0

    counting = kube_client.ApiClient(kube_api.configuration)
    before = gets()
    same = kube_apply.apply(counting, desired, known=first.version)
    assert same.outcome is kube_apply.Outcome.UNCHANGED
    assert gets() == before, "an apply with `known` read the object first"

    core = client.CoreV1Api(kube_api)
    core.patch_namespaced_service(
        "known", ns, {"spec": {"ports": [{"name": "http", "port": 8000, "targetPort": 9999}]}}
    )
    edited = kube_apply.apply(counting, desired, known=same.version)
    assert edited.outcome is kube_apply.Outcome.UPDATED
    port = core.read_namespaced_service("known", ns).spec.ports[0]
    assert port.target_port != 9999, "the hand edit of a field we own was not taken back"

    core.delete_namespaced_service("known", ns)
    again = kube_apply.apply(counting, desired, known=edited.version)
    assert again.outcome is kube_apply.Outcome.CREATED


def test_a_status_write_by_another_controller_is_not_an_update(
    kube_api: client.ApiClient, ns: str
) -> None:
    """The disruption controller writes a PDB's status (its resourceVersion moves); the
    next apply is unchanged, so a resync posts no `PodDisruptionBudgetUpdated` event. A
    hand edit of its spec still reads as updated."""
    md = ModelDeployment.model_validate(
        {
            "metadata": {"name": "known-pdb", "namespace": ns, "uid": str(uuid.uuid4())},
            "spec": {"model": {"name": "toy_llm", "repository": "/models"}, "minReplicas": 2},
        }
    )
    desired = pdb.build(md)
    desired["metadata"].pop("ownerReferences")
    name = desired["metadata"]["name"]
    first = kube_apply.apply(kube_api, desired)
    assert first.version is not None
    policy = client.PolicyV1Api(kube_api)
    policy.patch_namespaced_pod_disruption_budget_status(
        name,
        ns,
        {"status": {"currentHealthy": 1, "desiredHealthy": 1, "disruptionsAllowed": 0,
                    "expectedPods": 2, "observedGeneration": 1}},
    )  # fmt: skip
    moved = policy.read_namespaced_pod_disruption_budget(name, ns)
    assert moved.metadata.resource_version != first.version.resource_version
    same = kube_apply.apply(kube_api, desired, known=first.version)
    assert same.outcome is kube_apply.Outcome.UNCHANGED

    policy.patch_namespaced_pod_disruption_budget(name, ns, {"spec": {"maxUnavailable": 7}})
    edited = kube_apply.apply(kube_api, desired, known=same.version)
    assert edited.outcome is kube_apply.Outcome.UPDATED
