"""Thin kopf handlers that converge a ModelDeployment's children and report its status.

Level-based: create, update, resume, a periodic resync and any change of a child
Deployment all run the same pass, so a missed event or a hand edit is repaired."""

from __future__ import annotations

import logging
import time
from typing import Any

import kopf
from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError

from modelscale.api.v1alpha1 import GROUP, PLURAL, VERSION, ModelDeployment
from modelscale.control import pods as pod_facts
from modelscale.control import replicas, status, validation
from modelscale.handlers import settings
from modelscale.handlers.shared import api_client
from modelscale.kube import apply as kube_apply
from modelscale.kube import events
from modelscale.kube import status as kube_status
from modelscale.resources import deployment, names, pdb, service

log = logging.getLogger(__name__)

INVALID_SPEC = "InvalidSpec"


def parse(body: kopf.Body | dict[str, Any]) -> ModelDeployment:
    try:
        return ModelDeployment.model_validate(dict(body))
    except ValidationError as err:
        raise kopf.PermanentError(f"invalid ModelDeployment: {validation.short(err)}") from err


def children(md: ModelDeployment, *, replicas_: int) -> list[dict[str, Any]]:
    return [deployment.build(md, replicas=replicas_), service.build(md), pdb.build(md)]


def converge(md: ModelDeployment, body: kopf.Body | dict[str, Any], *, now: float) -> None:
    """Apply the children, then write the status once."""
    api = api_client()
    current = kube_apply.read_deployment(api, namespace=md.namespace, name=names.deployment(md))
    choice = replicas.choose(
        md.spec,
        status_desired=md.status.desired_replicas if md.status else None,
        running=current.replicas if current else None,
    )
    apply_error = None
    try:
        for obj in children(md, replicas_=choice.replicas):
            # The Deployment's replicas were decided from what was read: apply only if
            # nobody (the scaling loop) changed it since, or we would undo their scale.
            guard = current.resource_version if current and obj["kind"] == "Deployment" else None
            applied = kube_apply.apply(api, obj, precondition=guard)
            if applied.outcome is not kube_apply.Outcome.UNCHANGED:
                events.post(
                    api,
                    involved=dict(body),
                    type_="Normal",
                    reason=f"{applied.kind}{applied.outcome.value.capitalize()}",
                    message=f"{applied.kind} {applied.name} {applied.outcome.value}"
                    + (f" with {choice.replicas} replicas" if applied.kind == "Deployment" else ""),
                    now=now,
                )
    except ApiException as err:
        if err.status == 409:
            raise kopf.TemporaryError("the Deployment changed while reconciling", delay=1) from err
        if err.status in (400, 403, 422):
            # The apiserver refused what we built: retrying the same object cannot help.
            apply_error = (
                f"the apiserver refused a child object ({err.status}): "
                f"{err.reason}: {err.body!s:.500}"
            )
            events.post(
                api,
                involved=dict(body),
                type_="Warning",
                reason=status.APPLY_FAILED,
                message=apply_error,
                now=now,
            )
        else:
            raise kopf.TemporaryError(f"applying children failed: {err.reason}", delay=10) from err
    raw_pods = kube_status.list_pods(
        api, namespace=md.namespace, selector=names.selector_string(md)
    )
    facts = [pod_facts.facts(p) for p in raw_pods]

    def build(existing: list[dict[str, Any]]) -> dict[str, Any]:
        new_status = status.compute(
            md,
            desired=choice.replicas,
            deployment_status=None,
            pods=raw_pods,
            pod_facts=facts,
            apply_error=apply_error,
            now=now,
            existing_conditions=existing,
        )
        if md.spec.scaling.mode == "Predictive":
            # The scaling loop owns desiredReplicas in Predictive mode; writing what this
            # pass read could put back an older decision.
            new_status.pop("desiredReplicas", None)
        return new_status

    kube_status.patch_status_guarded(api, body=body, build=build)


def resync_all() -> None:
    """Reconcile every ModelDeployment once: repairs drift in children whose changes we
    do not watch (a hand-edited Service or PDB). Run periodically by the scaling loop's
    task, not by a kopf timer: kopf puts a finalizer on every object a timer runs for,
    and a finalizer on the user's object is drift for GitOps and blocks deletion while
    the operator is down."""
    for body in kube_status.list_modeldeployments(
        api_client(), namespaces=list(settings.current.namespaces) or None
    ):
        try:
            reconcile(body)
        except Exception as err:  # one ModelDeployment must not stop the others' resync
            log.warning(
                "resync of %s/%s: %s",
                body["metadata"].get("namespace"),
                body["metadata"].get("name"),
                err,
            )


def reconcile(body: kopf.Body | dict[str, Any]) -> None:
    now = time.time()
    if body.get("metadata", {}).get("deletionTimestamp"):
        # Being deleted (foreground deletion lingers): recreating children would bring GPU
        # pods back and block the deletion.
        return
    try:
        md = parse(body)
    except kopf.PermanentError as err:
        # A spec that slipped past the schema: say so in status, never crash-loop.
        meta = body.get("metadata", {})
        existing = list((body.get("status") or {}).get("conditions") or [])
        api = api_client()
        message, generation = str(err), meta.get("generation")
        previous = (body.get("status") or {}).get("conditions") or []
        invalid = status.invalid_spec(existing, message=message, generation=generation, now=now)
        if invalid["conditions"] != previous:  # report once, not on every resync
            kube_status.patch_status_guarded(
                api,
                body=body,
                build=lambda conds: status.invalid_spec(
                    conds, message=message, generation=generation, now=now
                ),
            )
            events.post(
                api,
                involved=dict(body),
                type_="Warning",
                reason=INVALID_SPEC,
                message=message,
                now=now,
            )
        raise
    try:
        converge(md, body, now=now)
    except ApiException as err:
        raise kopf.TemporaryError(
            f"Kubernetes API error: {err.status} {err.reason}", delay=10
        ) from err


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
def modeldeployment_reconcile(body: kopf.Body, **_: Any) -> None:
    reconcile(body)


@kopf.on.event("apps", "v1", "deployments", labels={names.LABEL_MANAGED_BY: names.MANAGED_BY})
def child_deployment_event(type: str | None, body: kopf.Body, **_: Any) -> None:
    """A child Deployment changed (rollout progress, or someone edited it): converge and
    refresh the owner's status."""
    owner = body.get("metadata", {}).get("labels", {}).get(names.LABEL_MODELDEPLOYMENT)
    namespace = body.get("metadata", {}).get("namespace")
    if not owner or not namespace:
        return
    try:
        md_body = kube_status.get_modeldeployment(api_client(), namespace=namespace, name=owner)
    except ApiException as err:
        if err.status == 404:
            return  # the owner is gone; garbage collection removes the child
        raise kopf.TemporaryError(
            f"reading ModelDeployment {namespace}/{owner}: {err.reason}", delay=5
        ) from err
    try:
        reconcile(md_body)
    except kopf.PermanentError:
        return  # already reported on the ModelDeployment
