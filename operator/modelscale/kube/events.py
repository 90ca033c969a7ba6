"""Kubernetes Events for what the operator does outside kopf handlers (the scaling loop).

Inside a kopf handler use kopf.info/warn; this is for code kopf does not drive."""

from __future__ import annotations

import logging
from typing import Any, Literal

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from modelscale.api.v1alpha1 import to_rfc3339 as timestamp

log = logging.getLogger(__name__)
COMPONENT = "modelscale"


def post(
    api: client.ApiClient,
    *,
    involved: dict[str, Any],
    type_: Literal["Normal", "Warning"],
    reason: str,
    message: str,
    now: float,
) -> None:
    """Post one core/v1 Event about `involved` (a raw object with apiVersion, kind,
    metadata). Failing to post an event is logged, never fatal."""
    meta = involved["metadata"]
    namespace = meta["namespace"]
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{meta['name']}.", "namespace": namespace},
        "involvedObject": {
            "apiVersion": involved["apiVersion"],
            "kind": involved["kind"],
            "name": meta["name"],
            "namespace": namespace,
            "uid": meta.get("uid"),
        },
        "type": type_,
        "reason": reason,
        "message": message[:1024],
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "reportingInstance": COMPONENT,
        "firstTimestamp": timestamp(now),
        "lastTimestamp": timestamp(now),
        "count": 1,
    }
    try:
        body = client.CoreV1Event.from_dict(event)
        assert body is not None
        client.CoreV1Api(api).create_namespaced_event(namespace, body)
    except ApiException as err:
        log.warning("could not post event %s on %s/%s: %s", reason, namespace, meta["name"], err)
