"""Writing a ModelDeployment's status subresource: typed status in, one merge patch out."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError

from modelscale import telemetry
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


def merge_changes(stored: Any, patch: Any) -> bool:
    """Whether applying the JSON merge patch `patch` (RFC 7386) to `stored` would change it:
    `null` removes a key (no change when it is absent), an object merges key by key, any
    other value (lists included) replaces what is there whole."""
    if not isinstance(patch, Mapping):
        return bool(stored != patch)
    if not isinstance(stored, Mapping):
        return True
    for key, value in patch.items():
        if value is None:
            if key in stored:
                return True
        elif key not in stored or merge_changes(stored[key], value):
            return True
    return False


def without(patch: Mapping[str, Any], paths: Sequence[tuple[str, ...]]) -> dict[str, Any]:
    """`patch` with the keys at `paths` left out (a copy; `patch` is not changed)."""
    out = dict(patch)
    for path in paths:
        node: dict[str, Any] = out
        for part in path[:-1]:
            child = node.get(part)
            if not isinstance(child, Mapping):
                break
            node[part] = node = dict(child)
        else:
            node.pop(path[-1], None)
    return out


def patch_status_guarded(
    api: client.ApiClient,
    *,
    body: Mapping[str, Any],
    build: StatusBuilder,
    attempts: int = 3,
    volatile: Sequence[tuple[str, ...]] = (),
    writer: str = "reconcile",
) -> bool:
    """Merge-patch the status `build(conditions)` computes from the conditions of the
    object as it was read, only if the object is still at that resourceVersion. A merge
    patch replaces the conditions list whole, so two writers that each own some condition
    types would otherwise put back each other's old ones; on a conflict, read again and
    rebuild. Only the fields `build` set are written (`to_api(..., patch=True)`): keys
    other writers own are left alone.

    Nothing is sent when the patch would not change the status as read (`merge_changes`):
    at 1,000 ModelDeployments a write per pass per object was most of the operator's
    calls. Nor when it would change only the `volatile` fields (paths of keys below
    status, such as state that moves with the clock alone): the caller passes them only
    on passes where it does not want that state written. `writer` labels the conflict
    counter. Returns whether it wrote."""
    meta = body["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    version = meta.get("resourceVersion")
    existing = conditions_of(body)
    stored = body.get("status") or {}
    for attempt in range(attempts):
        patch: dict[str, Any] = {"status": to_api(build(existing), patch=True)}
        if not merge_changes(stored, without(patch["status"], volatile)):
            telemetry.STATUS_WRITES_SKIPPED.inc()
            return False
        if version:
            patch["metadata"] = {"resourceVersion": version}
        try:
            client.CustomObjectsApi(api).patch_namespaced_custom_object_status(
                GROUP, VERSION, namespace, PLURAL, name, patch, _content_type=MERGE_PATCH
            )
            telemetry.STATUS_WRITES.inc()
            return True
        except ApiException as err:
            if err.status == 409:
                telemetry.STATUS_CONFLICTS.labels(writer).inc()
            if err.status != 409 or attempt == attempts - 1:
                raise
        fresh = reads.get_modeldeployment(api, namespace=namespace, name=name)
        version = fresh["metadata"].get("resourceVersion")
        existing = conditions_of(fresh)
        stored = fresh.get("status") or {}
    return False  # unreachable: the last attempt returns or raises
