"""Writing a ModelDeployment's status subresource: typed status in, one merge patch out."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError

from modelscale.api.v1alpha1 import (
    GROUP,
    PLURAL,
    VERSION,
    Condition,
    ModelDeploymentStatus,
    to_api,
)
from modelscale.kube import reads

MERGE_PATCH = "application/merge-patch+json"

StatusBuilder = Callable[[Sequence[Condition]], ModelDeploymentStatus]


def conditions_of(body: Mapping[str, Any]) -> list[Condition]:
    """The conditions of a ModelDeployment body as last read. Read on their own, so that
    a status another writer broke elsewhere does not stop us reporting; a malformed
    condition is dropped (the merge writes ours in full)."""
    out: list[Condition] = []
    for raw in (body.get("status") or {}).get("conditions") or ():
        try:
            out.append(Condition.model_validate(raw))
        except ValidationError:
            continue
    return out


def patch_status_guarded(
    api: client.ApiClient,
    *,
    body: Mapping[str, Any],
    build: StatusBuilder,
    attempts: int = 3,
) -> None:
    """Merge-patch the status `build(conditions)` computes from the conditions of the
    object as it was read, only if the object is still at that resourceVersion. A merge
    patch replaces the conditions list whole, so two writers that each own some condition
    types would otherwise put back each other's old ones; on a conflict, read again and
    rebuild. Only the fields `build` set are written (`to_api(..., patch=True)`): keys
    other writers own are left alone."""
    meta = body["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    version = meta.get("resourceVersion")
    existing = conditions_of(body)
    for attempt in range(attempts):
        patch: dict[str, Any] = {"status": to_api(build(existing), patch=True)}
        if version:
            patch["metadata"] = {"resourceVersion": version}
        try:
            client.CustomObjectsApi(api).patch_namespaced_custom_object_status(
                GROUP, VERSION, namespace, PLURAL, name, patch, _content_type=MERGE_PATCH
            )
            return
        except ApiException as err:
            if err.status != 409 or attempt == attempts - 1:
                raise
        fresh = reads.get_modeldeployment(api, namespace=namespace, name=name)
        version = fresh["metadata"].get("resourceVersion")
        existing = conditions_of(fresh)
