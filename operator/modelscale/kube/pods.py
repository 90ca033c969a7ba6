"""Writing to pods: the warm-up gate condition (`pods/status`), annotations, deletion.
Every write carries the pod's uid, so a new pod that took the same name is never touched."""

from __future__ import annotations

from collections.abc import Mapping

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from modelscale.api.v1alpha1 import Condition
from modelscale.warmup import gate

STRATEGIC_MERGE = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"


def patch_condition(
    api: client.ApiClient, *, namespace: str, name: str, uid: str, condition: Condition
) -> None:
    client.CoreV1Api(api).patch_namespaced_pod_status(
        name, namespace, gate.status_patch(condition, uid=uid), _content_type=STRATEGIC_MERGE
    )


def patch_annotations(
    api: client.ApiClient,
    *,
    namespace: str,
    name: str,
    uid: str,
    annotations: Mapping[str, str | None],
) -> None:
    """Merge patch: a None value removes the annotation."""
    if not annotations:
        return
    client.CoreV1Api(api).patch_namespaced_pod(
        name,
        namespace,
        {"metadata": {"uid": uid, "annotations": dict(annotations)}},
        _content_type=MERGE,
    )


def delete(api: client.ApiClient, *, namespace: str, name: str, uid: str) -> None:
    """Delete the pod with this uid; one already gone or replaced is not an error."""
    try:
        client.CoreV1Api(api).delete_namespaced_pod(
            name,
            namespace,
            body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=uid)),
        )
    except ApiException as err:
        if err.status not in (404, 409):
            raise
