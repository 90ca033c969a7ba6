"""A guarded Deployment apply against the real apiserver when another client writes the
Deployment between every read and every apply (CI of 2026-12-03: a writer every 50 ms kept
the reconcile's apply, and the status written after it, out for three minutes).

The other writer is injected after each of the apply's own reads (a real write through the
real apiserver), so every apply it sends with the version read meets a real 409.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from modelscale.api.v1alpha1 import ModelDeployment
from modelscale.kube import apply as kube_apply
from modelscale.resources import deployment

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def ns(installed: None, module_namespace: str) -> str:
    return module_namespace


def _desired(ns: str, name: str, replicas: int) -> dict[str, Any]:
    md = ModelDeployment.model_validate(
        {
            "metadata": {"name": name, "namespace": ns, "uid": str(uuid.uuid4())},
            "spec": {"model": {"name": "toy_llm", "repository": "/models"}},
        }
    )
    desired = deployment.build(md, replicas=replicas)
    desired["metadata"].pop("ownerReferences")  # no owner here: the GC would remove it
    return desired


def _after_each_read(monkeypatch: pytest.MonkeyPatch, write: Callable[[int], None]) -> list[int]:
    """Make another client write (`write(n)`) right after each read `apply` makes."""
    calls = [0]
    real = kube_apply.running

    def read_then_someone_writes(dep: Any) -> kube_apply.Running | None:
        calls[0] += 1
        write(calls[0])
        return real(dep)

    monkeypatch.setattr(kube_apply, "running", read_then_someone_writes)
    return calls


# The cluster's Deployment controller writes a new Deployment's status a few times after
# its creation (its ReplicaSet, replica counts, conditions). Those writes move the version
# too, and while they last they add conflicts of their own to the ones a test injects: on
# CI of 2026-12-04 three of them met the two retries the first test leaves spare. So a
# test starts once the controller has observed the Deployment and written nothing for
# QUIET_S; a controller that never goes quiet fails the test here, loudly.
QUIET_S = 2.0
SETTLE_DEADLINE_S = 60.0


def _settled(apps: client.AppsV1Api, ns: str, name: str) -> None:
    began = time.monotonic()
    version, since = None, began
    while True:
        dep = apps.read_namespaced_deployment(name, ns)
        now = time.monotonic()
        if dep.metadata.resource_version != version:
            version, since = dep.metadata.resource_version, now
        observed = (dep.status.observed_generation or 0) >= dep.metadata.generation
        if observed and now - since >= QUIET_S:
            return
        if now - began > SETTLE_DEADLINE_S:
            pytest.fail(
                f"Deployment {ns}/{name} still changing after {SETTLE_DEADLINE_S:g} s "
                f"(version {version}, observed generation {dep.status.observed_generation} "
                f"of {dep.metadata.generation}): is the cluster's controller-manager running?"
            )
        time.sleep(0.2)


def _first(kube_api: client.ApiClient, ns: str, replicas: int) -> tuple[str, kube_apply.Running]:
    name = f"busy-{uuid.uuid4().hex[:5]}"
    kube_apply.apply(kube_api, _desired(ns, name, replicas))
    _settled(client.AppsV1Api(kube_api), ns, name)
    read = kube_apply.read_deployment(kube_api, namespace=ns, name=name)
    assert read is not None
    return name, read


def test_an_apply_lands_while_another_writer_moves_only_the_version(
    kube_api: client.ApiClient, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    apps = client.AppsV1Api(kube_api)
    name, read = _first(kube_api, ns, replicas=1)

    def annotate(n: int) -> None:
        bump = {"metadata": {"annotations": {"test.modelscale.dev/bump": str(n)}}}
        apps.patch_namespaced_deployment(name, ns, bump)

    annotate(0)  # the version the decision was read at is already stale
    # The first reads are each followed by a write, so the apply after them conflicts too.
    # Two retries are left spare: the cluster's Deployment controller writes the status
    # too, as it does in production.
    writes = [0]

    def annotate_first_reads(n: int) -> None:
        if n <= kube_apply.CONFLICT_RETRIES - 2:
            writes[0] += 1
            annotate(n)

    reads = _after_each_read(monkeypatch, annotate_first_reads)

    applied = kube_apply.apply(kube_api, _desired(ns, name, replicas=2), precondition=read)

    assert applied.outcome is kube_apply.Outcome.UPDATED
    assert writes[0] == kube_apply.CONFLICT_RETRIES - 2 and reads[0] > writes[0]
    assert apps.read_namespaced_deployment(name, ns).spec.replicas == 2


def test_an_apply_never_undoes_a_scale_another_writer_made(
    kube_api: client.ApiClient, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    apps = client.AppsV1Api(kube_api)
    name, read = _first(kube_api, ns, replicas=1)
    apps.patch_namespaced_deployment_scale(name, ns, {"spec": {"replicas": 3}})

    with pytest.raises(ApiException) as raised:
        kube_apply.apply(kube_api, _desired(ns, name, replicas=2), precondition=read)

    assert raised.value.status == 409
    assert apps.read_namespaced_deployment(name, ns).spec.replicas == 3


def test_an_apply_gives_up_when_the_version_moves_after_every_read(
    kube_api: client.ApiClient, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bounded: a writer that always wins costs `CONFLICT_RETRIES` reads, then a 409 the
    caller answers next pass, never a loop."""
    apps = client.AppsV1Api(kube_api)
    name, read = _first(kube_api, ns, replicas=1)

    def annotate(n: int) -> None:
        bump = {"metadata": {"annotations": {"test.modelscale.dev/bump": str(n)}}}
        apps.patch_namespaced_deployment(name, ns, bump)

    annotate(0)
    reads = _after_each_read(monkeypatch, annotate)

    with pytest.raises(ApiException) as raised:
        kube_apply.apply(kube_api, _desired(ns, name, replicas=2), precondition=read)

    assert raised.value.status == 409
    assert reads[0] == kube_apply.CONFLICT_RETRIES
    assert apps.read_namespaced_deployment(name, ns).spec.replicas == 1
