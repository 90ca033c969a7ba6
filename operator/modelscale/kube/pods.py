"""Writing to pods: the warm-up gate condition (`pods/status`), annotations, deletion.
Every write carries the pod's uid, so a new pod that took the same name is never touched."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from modelscale.warmup import gate

STRATEGIC_MERGE = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"

log = logging.getLogger(__name__)


# Answers worth another try: the apiserver is overloaded (429, with priority and fairness)
# or briefly unavailable (5xx, e.g. while it restarts behind a load balancer).
RETRIABLE = frozenset({429, 500, 502, 503, 504})


def patch_condition(
    api: client.ApiClient,
    *,
    namespace: str,
    name: str,
    uid: str,
    change: gate.GateChange,
    retry_for: float = 0.0,
) -> None:
    """Write the gate condition and its annotations in one patch. With `retry_for` > 0, a
    429/5xx is retried with backoff for that many seconds before it is raised: the write
    that opens the gate after a finished warm-up is worth more than one try."""
    body = gate.status_patch(change.condition, uid=uid, annotations=change.annotations)
    deadline = time.monotonic() + retry_for
    delay = 0.25
    while True:
        try:
            client.CoreV1Api(api).patch_namespaced_pod_status(
                name, namespace, body, _content_type=STRATEGIC_MERGE
            )
            return
        except ApiException as err:
            left = deadline - time.monotonic()
            if err.status not in RETRIABLE or left <= 0:
                raise
            log.warning(
                "%s/%s: gate write answered %s %s; retrying (%.0f s left)",
                namespace,
                name,
                err.status,
                err.reason,
                left,
            )
            time.sleep(min(delay, left))
            delay = min(delay * 2, 4.0)


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
