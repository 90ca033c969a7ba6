"""Writing a ModelDeployment's status subresource: typed status in, one merge patch out."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jsonpatch
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
JSON_PATCH = "application/json-patch+json"

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


def merged(stored: Any, patch: Any) -> Any:
    """`stored` with the JSON merge patch `patch` applied (RFC 7386); a copy."""
    if not isinstance(patch, Mapping):
        return patch
    out = dict(stored) if isinstance(stored, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merged(out.get(key), value)
    return out


def _pointer(path: Sequence[str]) -> str:
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in path)


def _replaced_lists(
    stored: Any, patch: Any, path: tuple[str, ...]
) -> list[tuple[tuple[str, ...], Any]] | None:
    """The lists `patch` replaces whole, each with its value in `stored`; None when the
    patch writes a list where `stored` has none (a JSON Patch cannot test for absence)."""
    out: list[tuple[tuple[str, ...], Any]] = []
    if not isinstance(patch, Mapping):
        return out
    for key, value in patch.items():
        here = stored.get(key) if isinstance(stored, Mapping) else None
        if isinstance(value, list):
            if not isinstance(here, list):
                return None
            out.append(((*path, key), here))
        elif isinstance(value, Mapping):
            inner = _replaced_lists(here, value, (*path, key))
            if inner is None:
                return None
            out += inner
    return out


def content_guarded(
    stored: Mapping[str, Any], patch: Mapping[str, Any]
) -> list[dict[str, Any]] | None:
    """A JSON Patch (RFC 6902) of the status subresource with the effect of merge-patching
    `{"status": patch}` onto `{"status": stored}`, that the apiserver applies only while
    every list the merge would replace whole (the conditions above all) still holds what
    `stored` holds. Keys and maps merge as a merge patch's would, so other writers' keys
    are left alone. None when the patch writes a list `stored` lacks: nothing to test."""
    lists = _replaced_lists(stored, patch, ("status",))
    if lists is None:
        return None
    tests = [{"op": "test", "path": _pointer(p), "value": v} for p, v in lists]
    diff = jsonpatch.make_patch({"status": dict(stored)}, {"status": merged(stored, patch)})
    return [*tests, *diff.patch]


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

    The resourceVersion moves with any write to the object, an annotation included: a
    client that writes the object more often than we can read and patch it would keep
    every status write out (seen in CI with a writer every 50 ms on a loaded machine).
    After `attempts` conflicts, one last write is guarded by content instead: a JSON Patch
    that the apiserver applies only if the conditions (every list the patch replaces) are
    still the ones it was built from (`content_guarded`). It fails, and the conflict is
    raised, only when another writer changed them.

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
    api_objects = client.CustomObjectsApi(api)
    conflict: ApiException | None = None
    for attempt in range(attempts + 1):
        patch: dict[str, Any] = {"status": to_api(build(existing), patch=True)}
        if not merge_changes(stored, without(patch["status"], volatile)):
            telemetry.STATUS_WRITES_SKIPPED.inc()
            return False
        if conflict is not None:  # the content-guarded last write
            ops = content_guarded(stored, patch["status"]) if stored else None
            if ops is None:
                raise conflict
            try:
                api_objects.patch_namespaced_custom_object_status(
                    GROUP, VERSION, namespace, PLURAL, name, ops, _content_type=JSON_PATCH
                )
            except ApiException as err:
                if err.status != 422:  # 422: a test failed, the conditions moved
                    raise
                telemetry.STATUS_CONFLICTS.labels(writer).inc()
                raise conflict from err
            telemetry.STATUS_WRITES.inc()
            return True
        if version:
            patch["metadata"] = {"resourceVersion": version}
        try:
            api_objects.patch_namespaced_custom_object_status(
                GROUP, VERSION, namespace, PLURAL, name, patch, _content_type=MERGE_PATCH
            )
            telemetry.STATUS_WRITES.inc()
            return True
        except ApiException as err:
            if err.status != 409:
                raise
            telemetry.STATUS_CONFLICTS.labels(writer).inc()
            if attempt == attempts - 1:
                conflict = err
        fresh = reads.get_modeldeployment(api, namespace=namespace, name=name)
        version = fresh["metadata"].get("resourceVersion")
        existing = conditions_of(fresh)
        stored = fresh.get("status") or {}
    return False  # unreachable: the last attempt returns or raises
