"""Status writes against the real apiserver when another client writes the object between
every read and every write (CI of 2026-12-03: a writer every 50 ms on a loaded machine kept
`warmedReplicas` at 1 for three minutes after the second pod warmed).

The other writer is injected after each of the operator's own reads (a real write through
the real apiserver), so every resourceVersion-guarded attempt meets a real 409.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from modelscale.api.v1alpha1 import GROUP, PLURAL, VERSION, Condition, ModelDeploymentStatus
from modelscale.kube import reads
from modelscale.kube import status as kube_status

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def ns(installed: None, module_namespace: str) -> str:
    return module_namespace


@pytest.fixture
def md(kube_api: client.ApiClient, ns: str) -> Iterator[str]:
    """A ModelDeployment whose status holds a Ready condition (ours) and an `Other` one
    (another writer's), and 1 warmed replica."""
    name = f"busy-{uuid.uuid4().hex[:5]}"
    api = client.CustomObjectsApi(kube_api)
    body = {
        "apiVersion": "modelscale.dev/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"model": {"name": "toy_llm", "repository": "/models"}, "minReplicas": 1},
    }
    api.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, body)
    status = {
        "warmedReplicas": 1,
        "autoscaling": {"reason": "Steady", "recommendedReplicas": 1},
        "conditions": [
            {"type": "Ready", "status": "True", "reason": "Warmed", "message": "1 of 1"},
            {"type": "Other", "status": "True", "reason": "Theirs", "message": "v0"},
        ],
    }
    api.patch_namespaced_custom_object_status(
        GROUP, VERSION, ns, PLURAL, name, {"status": status},
        _content_type=kube_status.MERGE_PATCH,
    )  # fmt: skip
    yield name
    api.delete_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name)


def _read(api: client.ApiClient, ns: str, name: str) -> dict[str, Any]:
    """Read as the test, not through the operator's (patched) read."""
    got: dict[str, Any] = client.CustomObjectsApi(api).get_namespaced_custom_object(
        GROUP, VERSION, ns, PLURAL, name
    )
    return got


def _writer_after_each_read(
    monkeypatch: pytest.MonkeyPatch, write: Callable[[int], None]
) -> list[int]:
    """Make another client write (`write(n)`) right after each of the operator's reads."""
    calls = [0]
    real = reads.get_modeldeployment

    def read_then_someone_writes(api: client.ApiClient, **kw: str) -> dict[str, Any]:
        fresh = real(api, **kw)
        calls[0] += 1
        write(calls[0])
        return fresh

    monkeypatch.setattr(kube_status.reads, "get_modeldeployment", read_then_someone_writes)
    return calls


def _two_warmed(existing: Sequence[Condition]) -> ModelDeploymentStatus:
    """What the reconcile pass writes when the second pod has warmed: its own Ready
    condition rewritten, the other writer's kept as read."""
    ready = Condition(type="Ready", status="True", reason="Warmed", message="2 of 2")
    kept = [c for c in existing if c.type != "Ready"]
    return ModelDeploymentStatus(warmed_replicas=2, conditions=[ready, *kept])


def test_a_status_write_lands_though_the_object_moves_between_every_read_and_write(
    kube_api: client.ApiClient, ns: str, md: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = client.CustomObjectsApi(kube_api)
    stale = _read(kube_api, ns, md)

    def annotate(n: int) -> None:
        bump = {"metadata": {"annotations": {"test.modelscale.dev/bump": str(n)}}}
        api.patch_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, md, bump)

    annotate(0)  # the body the pass holds is already stale
    reads_made = _writer_after_each_read(monkeypatch, annotate)

    assert kube_status.patch_status_guarded(kube_api, body=stale, build=_two_warmed)

    assert reads_made[0] == 3  # three guarded attempts met a conflict, each read again
    status = _read(kube_api, ns, md)["status"]
    assert status["warmedReplicas"] == 2
    assert [(c["type"], c["message"]) for c in status["conditions"]] == [
        ("Ready", "2 of 2"),
        ("Other", "v0"),
    ]
    # Keys the write did not set are left as they were, as a merge patch leaves them.
    assert status["autoscaling"] == {"reason": "Steady", "recommendedReplicas": 1}


def test_a_status_write_never_puts_back_conditions_another_writer_changed(
    kube_api: client.ApiClient, ns: str, md: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = client.CustomObjectsApi(kube_api)
    stale = _read(kube_api, ns, md)

    def rewrite_other(n: int) -> None:
        fresh = _read(kube_api, ns, md)
        conds = [
            {**c, "message": f"w{n}"} if c["type"] == "Other" else c
            for c in fresh["status"]["conditions"]
        ]
        api.patch_namespaced_custom_object_status(
            GROUP, VERSION, ns, PLURAL, md, {"status": {"conditions": conds}},
            _content_type=kube_status.MERGE_PATCH,
        )  # fmt: skip

    rewrite_other(0)  # the body the pass holds is already stale
    _writer_after_each_read(monkeypatch, rewrite_other)

    with pytest.raises(ApiException) as raised:
        kube_status.patch_status_guarded(kube_api, body=stale, build=_two_warmed)

    assert raised.value.status == 409  # callers see a conflict, as before: try next pass
    status = _read(kube_api, ns, md)["status"]
    other = next(c for c in status["conditions"] if c["type"] == "Other")
    assert other["message"] == "w3"  # the other writer's last word stands
    assert status["warmedReplicas"] == 1  # and nothing of ours was half-written
