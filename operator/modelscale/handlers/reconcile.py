"""kopf handlers that converge a ModelDeployment's children and report its status: every
event runs the same level-based pass (`loops.reconcile`)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import kopf
from kubernetes.client.exceptions import ApiException

from modelscale.api.v1alpha1 import GROUP, PLURAL, VERSION
from modelscale.handlers import runtime
from modelscale.kube import reads
from modelscale.loops import reconcile as loop
from modelscale.resources import names


def _reconcile(rt: runtime.Runtime, body: Mapping[str, Any]) -> None:
    try:
        loop.reconcile(
            rt.api, body, now=time.time(), allow_privileged=rt.config.allow_privileged_pods
        )
    except loop.InvalidSpecError as err:
        raise kopf.PermanentError(str(err)) from err
    except loop.RetryError as err:
        raise kopf.TemporaryError(str(err), delay=err.delay) from err


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
def modeldeployment_reconcile(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    _reconcile(runtime.of(memo), body)


@kopf.on.event("apps", "v1", "deployments", labels={names.LABEL_MANAGED_BY: names.MANAGED_BY})
def child_deployment_event(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    """A child Deployment changed (rollout progress, or someone edited it): converge and
    refresh the owner's status."""
    owner = body.get("metadata", {}).get("labels", {}).get(names.LABEL_MODELDEPLOYMENT)
    namespace = body.get("metadata", {}).get("namespace")
    if not owner or not namespace:
        return
    rt = runtime.of(memo)
    try:
        md_body = reads.fetch_modeldeployment(rt.api, namespace=namespace, name=owner)
    except ApiException as err:
        raise kopf.TemporaryError(
            f"reading ModelDeployment {namespace}/{owner}: {err.reason}", delay=5
        ) from err
    if md_body is None:
        return  # the owner is gone; garbage collection removes the child
    try:
        _reconcile(rt, md_body)
    except kopf.PermanentError:
        return  # already reported on the ModelDeployment
