"""Server-side apply of the children a ModelDeployment owns, with an explicit outcome.

One field manager for everything the operator writes, so that a hand edit of a field we
own is taken back on the next pass ("converge, don't create-if-missing") while fields
other managers own (an admission webhook's, say) are left alone.

`apply_all` applies a ModelDeployment's children all or none: every object is first sent as
a server-side dry run (validation and admission, nothing stored), and only when the
apiserver would take all of them are they applied. Applied one by one, a Deployment the
apiserver took followed by a Service it refused left GPU pods running with no Service and no
disruption budget.
"""

from __future__ import annotations

import enum
import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

FIELD_MANAGER = "modelscale"
APPLY_CONTENT_TYPE = "application/apply-patch+yaml"

log = logging.getLogger(__name__)


class Outcome(enum.StrEnum):
    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"


@dataclass(frozen=True)
class Applied:
    kind: str
    name: str
    outcome: Outcome
    version: Known | None = None
    """The object's resourceVersion and uid after the apply (for the next `known`)."""


@dataclass(frozen=True)
class Known:
    """An object as this operator last left it: a later apply with `known` needs no read
    to tell created / updated / unchanged apart (a new uid: created)."""

    resource_version: str
    uid: str
    generation: int | None = None


@dataclass(frozen=True)
class _KindApi:
    read: Callable[..., Any]
    path: str  # the object's URL path, with {namespace} and {name}
    returns: str  # the client's model name for the answer, e.g. "V1Deployment"


# kind -> its API class, its name in the read method, its group's path, its plural.
_KINDS: dict[str, tuple[type, str, str, str]] = {
    "Deployment": (client.AppsV1Api, "deployment", "/apis/apps/v1", "deployments"),
    "Service": (client.CoreV1Api, "service", "/api/v1", "services"),
    "Secret": (client.CoreV1Api, "secret", "/api/v1", "secrets"),
    "PodDisruptionBudget": (
        client.PolicyV1Api,
        "pod_disruption_budget",
        "/apis/policy/v1",
        "poddisruptionbudgets",
    ),
}


def _kind_api(api: client.ApiClient, kind: str) -> _KindApi:
    if kind not in _KINDS:
        raise ValueError(f"modelscale does not apply objects of kind {kind!r}")
    api_class, snake, group_path, plural = _KINDS[kind]
    return _KindApi(
        read=getattr(api_class(api), f"read_namespaced_{snake}"),
        path=f"{group_path}/namespaces/{{namespace}}/{plural}/{{name}}",
        returns=f"V1{kind}",
    )


def _resource_version(obj: Any) -> str | None:
    meta = getattr(obj, "metadata", None)
    return getattr(meta, "resource_version", None) or None


# What the apiserver answers when it refuses the object itself (bad field, admission):
# retrying the same object cannot help.
REFUSED_STATUSES = frozenset({400, 403, 422})


class ChildRefusedError(Exception):
    """The apiserver refused a child object; the message names the child and why."""

    def __init__(self, *, kind: str, name: str, status: int, reason: str) -> None:
        super().__init__(f"{kind} {name}: {reason}")
        self.kind = kind
        self.name = name
        self.status = status
        self.reason = reason


def apiserver_message(err: ApiException) -> str:
    """The apiserver's own sentence (`Service "x" is invalid: metadata.name: ...`)."""
    try:
        message = json.loads(err.body or "").get("message")
    except (ValueError, AttributeError):
        message = None
    return str(message or f"{err.status} {err.reason}")


# The BMP outside ASCII, escaped as `\uXXXX` as the client's json.dumps does: raw, some of it
# would change meaning in YAML (NEL, LS and PS are line breaks there, folded into a space
# inside a quoted string) or be refused (C1 controls, U+FFFE).
_BMP_NON_ASCII = re.compile("[\u007f-\uffff]")


def apply_body(desired: Mapping[str, Any]) -> bytes:
    r"""An apply patch as the apiserver's YAML decoder reads it back unchanged: JSON (which is
    YAML) in UTF-8, with characters beyond U+FFFF written raw. `json.dumps` escapes those as
    a surrogate pair (an emoji in an env value: `\ud83d\ude80`), which that decoder refuses
    ("found invalid Unicode character escape code"); every other non-ASCII character stays
    escaped."""
    text = json.dumps(desired, ensure_ascii=False, separators=(",", ":"))
    return _BMP_NON_ASCII.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode()


def _send(
    api: client.ApiClient,
    ops: _KindApi,
    desired: dict[str, Any],
    precondition: str | None,
    *,
    dry_run: bool,
) -> Any:
    if precondition is not None:
        desired = {**desired, "metadata": {**desired["metadata"], "resourceVersion": precondition}}
    meta = desired["metadata"]
    query: list[tuple[str, str]] = [("fieldManager", FIELD_MANAGER), ("force", "true")]
    if dry_run:
        query.append(("dryRun", "All"))
    # The generated patch methods accept only a dict, which the client serialises with
    # its own json.dumps; the body goes through the ApiClient's serialise/call/deserialise
    # steps instead (its timeout, auth and the leader fence apply as to every other call).
    body = apply_body(desired)
    request = api.param_serialize(
        method="PATCH",
        resource_path=ops.path,
        path_params={"namespace": meta["namespace"], "name": meta["name"]},
        query_params=query,
        header_params={"Content-Type": APPLY_CONTENT_TYPE, "Accept": "application/json"},
        body=body,
        auth_settings=["BearerToken"],
    )
    response = api.call_api(*request)
    response.read()  # type: ignore[no-untyped-call]
    return api.response_deserialize(
        response, response_types_map={"200": ops.returns, "201": ops.returns}
    ).data


# Kinds whose status a controller writes (the resourceVersion moves without any change
# of ours) and whose metadata.generation moves only with the spec: an apply is unchanged
# when the generation is the one our last apply left. By resourceVersion, every resync
# reported the PDB the disruption controller had touched as updated (an event each).
STATUS_WRITTEN_KINDS = frozenset({"Deployment", "PodDisruptionBudget"})


def _outcome(
    desired: dict[str, Any], before: str | None, after: Any, *, known: Known | None = None
) -> Applied:
    kind, name = desired["kind"], desired["metadata"]["name"]
    meta = getattr(after, "metadata", None)
    uid = getattr(meta, "uid", None)
    generation = getattr(meta, "generation", None)
    same_spec = (
        known is not None
        and kind in STATUS_WRITTEN_KINDS
        and known.generation is not None
        and generation == known.generation
    )
    if before is None or (known is not None and uid != known.uid):
        outcome = Outcome.CREATED
    elif _resource_version(after) == before or same_spec:
        outcome = Outcome.UNCHANGED
    else:
        outcome = Outcome.UPDATED
    log.info("%s %s/%s %s", kind, desired["metadata"]["namespace"], name, outcome)
    version = _resource_version(after)
    now_known = (
        Known(resource_version=version, uid=str(uid), generation=generation)
        if version and uid
        else None
    )
    return Applied(kind=kind, name=name, outcome=outcome, version=now_known)


def dry_run_all(api: client.ApiClient, objects: Sequence[dict[str, Any]]) -> None:
    """Send every object as a server-side dry run (validation and admission, nothing
    stored). Raises `ChildRefusedError` naming the first object the apiserver refuses;
    other API errors (5xx) pass through. No resourceVersion is sent: the dry run asks
    whether the objects are valid, the apply after it whether they are still current."""
    for desired in objects:
        try:
            _send(api, _kind_api(api, desired["kind"]), desired, None, dry_run=True)
        except ApiException as err:
            if err.status not in REFUSED_STATUSES:
                raise
            raise ChildRefusedError(
                kind=desired["kind"],
                name=desired["metadata"]["name"],
                status=int(err.status),
                reason=apiserver_message(err),
            ) from err


def apply_all(
    api: client.ApiClient,
    objects: Sequence[dict[str, Any]],
    *,
    preconditions: Mapping[str, Running] | None = None,
    dry_run: bool = True,
    known: Mapping[str, Known] | None = None,
) -> list[Applied]:
    """Converge every object, or none: `dry_run_all`, then `apply` each. `preconditions`
    maps a kind to the object as it was read, which it must still be (see `apply`).
    `dry_run=False` skips the dry run: for objects the apiserver already took as they are
    (the caller remembers what it applied last). `known` maps a kind to the object as the
    last apply left it (`Applied.version`): its read before the apply is skipped.

    One dry run more per object and pass. The dry run cannot replace `apply`'s read: the
    apiserver clears the resourceVersion of a dry-run update, so it does not tell an
    existing object from a new one."""
    guards = preconditions or {}
    if dry_run:
        dry_run_all(api, objects)
    last = known or {}
    return [
        apply(
            api,
            desired,
            precondition=guards.get(desired["kind"]),
            known=last.get(desired["kind"]),
        )
        for desired in objects
    ]


@dataclass(frozen=True)
class Running:
    """What a Deployment runs now, and the version that was read."""

    replicas: int
    resource_version: str


# Conflicts `apply` answers by reading again, when the read shows the replicas unchanged.
CONFLICT_RETRIES = 4


def apply(
    api: client.ApiClient,
    desired: dict[str, Any],
    *,
    precondition: Running | None = None,
    known: Known | None = None,
) -> Applied:
    """Converge one object to `desired` with server-side apply (force: we own it).

    With `precondition` (the Deployment as read) the apply is sent with the version read
    and fails with 409 Conflict unless the object is still at it: for a writer whose
    decision depends on what it read (the replicas), so two writers cannot undo each
    other. Any write moves the version, though (an annotation, the Deployment
    controller's status), and a client writing more often than a read-then-apply takes
    would keep every apply out (CI of 2026-12-03: a writer every 50 ms, reconcile stuck
    for three minutes). So a conflict is answered by reading again: while the read still
    runs the replicas the decision was made from, the apply is sent again with the new
    version (`CONFLICT_RETRIES` times); when the replicas moved, the 409 is raised.

    Without `precondition`, a read before the apply only names the outcome in logs and
    events; with `known` (the object as our last apply left it) there is no read: at 1,000
    ModelDeployments the reads were a third of a resync's calls. Then a change by another
    manager to fields we do not own reads as `updated` once."""
    meta = desired["metadata"]
    ops = _kind_api(api, desired["kind"])
    if precondition is not None:
        return _apply_while_running(api, ops, desired, precondition)
    before: str | None = None
    if known is not None:
        after = _send(api, ops, desired, None, dry_run=False)
        return _outcome(desired, known.resource_version, after, known=known)
    try:
        before = _resource_version(ops.read(meta["name"], meta["namespace"]))
    except ApiException as err:
        if err.status != 404:
            raise
    return _outcome(desired, before, _send(api, ops, desired, None, dry_run=False))


def _apply_while_running(
    api: client.ApiClient, ops: _KindApi, desired: dict[str, Any], read: Running
) -> Applied:
    meta = desired["metadata"]
    version = read.resource_version
    for attempt in range(CONFLICT_RETRIES + 1):
        try:
            return _outcome(desired, version, _send(api, ops, desired, version, dry_run=False))
        except ApiException as err:
            if err.status != 409 or attempt == CONFLICT_RETRIES:
                raise
            conflict = err
        fresh = running(ops.read(meta["name"], meta["namespace"]))
        if fresh is None or fresh.replicas != read.replicas:
            raise conflict
        version = fresh.resource_version
    raise AssertionError("unreachable: the last attempt returns or raises")


def running(dep: Any) -> Running | None:
    meta, spec = getattr(dep, "metadata", None), getattr(dep, "spec", None)
    if meta is None or spec is None or meta.resource_version is None:
        return None
    return Running(replicas=int(spec.replicas or 0), resource_version=meta.resource_version)


def read_deployment(api: client.ApiClient, *, namespace: str, name: str) -> Running | None:
    """The Deployment's replicas and resourceVersion, or None when it does not exist."""
    try:
        dep = client.AppsV1Api(api).read_namespaced_deployment(name, namespace)
    except ApiException as err:
        if err.status == 404:
            return None
        raise
    return running(dep)
