"""Security on the real cluster, with the operator installed by helm: a spec asking for a
hostPath volume is refused with a message, plain env values stay out of status, and the
operator's RBAC equals what it uses. The chart is installed with helm and the
operator runs as its ServiceAccount (a real process with that token); the apiserver
audits every request of that ServiceAccount (e2e/harness: Metadata level). A
ModelDeployment is served end to end (children applied, pods warmed, status written,
events posted) and deleted; then, rule by rule:

- no request of the operator was refused (no 403 in the audit log);
- every (group, resource, verb) it used is granted;
- every grant it did not use here is one of `NOT_EXERCISED`, each with the path that
  needs it. A grant that is neither used nor listed fails the test (drop it from the
  chart); a new call the chart lacks fails it too."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from toy_md import modeldeployment_body, toy_model, toy_server

from harness.cluster.components import AUDIT_LOG
from harness.kubectl import Kubectl, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.local_runtime]

OPERATOR_USER = "system:serviceaccount:modelscale-system:modelscale"
Grant = tuple[str, str, str]  # (apiGroup, resource[/subresource], verb)

NOT_EXERCISED: dict[Grant, str] = {
    ("apps", "deployments", "create"): "server-side apply of a new Deployment is audited as "
    "patch (201); the apiserver authorizes create as well",
    ("", "services", "create"): "the same, for a new Service",
    ("", "secrets", "create"): "the same, for a new Triton control-key Secret",
    ("policy", "poddisruptionbudgets", "create"): "the same, for a new PDB",
    ("", "pods", "delete"): "replacing a pod that never warms up",
    ("modelscale.dev", "modeldeployments/finalizers", "update"): "blockOwnerDeletion on the "
    "children where OwnerReferencesPermissionEnforcement admission runs (OpenShift)",
}


def granted(kubectl: Kubectl) -> set[Grant]:
    """The rules bound to the operator's ServiceAccount, as the cluster holds them."""
    out: set[Grant] = set()
    roles = [
        kubectl.json("get", "clusterrole", name) for name in ("modelscale", "modelscale-cluster")
    ]
    # Leader election: a Role in the release namespace for its one Lease.
    roles.append(
        kubectl.json("-n", "modelscale-system", "get", "role", "modelscale-leader-election")
    )
    for role in roles:
        for rule in role["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    out |= {(group, resource, verb) for verb in rule["verbs"]}
    return out


def audited(user: str = OPERATOR_USER) -> list[dict[str, Any]]:
    """Every request of the operator (`user`) since the cluster started (each e2e session
    starts its own cluster, and so its own audit log): watches begun at the operator's
    start count, they are logged when their response starts."""
    path = Path(AUDIT_LOG)
    if not path.exists():
        pytest.fail(f"no audit log at {path}: the local cluster's apiserver writes one")
    events: dict[str, dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        event = json.loads(line)
        if event["user"]["username"] == user:
            events.setdefault(event["auditID"], event)
    return list(events.values())


def used_by(events: list[dict[str, Any]]) -> set[Grant]:
    out: set[Grant] = set()
    for event in events:
        ref = event.get("objectRef") or {}
        if "resource" not in ref:
            continue  # discovery and other non-resource URLs need no RBAC rule
        resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        out.add((ref.get("apiGroup", ""), resource, event["verb"]))
    return out


@dataclass(frozen=True)
class Run:
    audited: list[dict[str, Any]]
    """The operator's requests."""
    served: dict[str, Any]
    """The served ModelDeployment as it stood once Ready."""
    started: str
    """When this module's scenario began (RFC 3339, UTC, as the audit log writes it)."""
    refused: dict[str, Any]
    """A ModelDeployment asking for a hostPath volume, once the operator reported it."""
    refused_children: list[str]


SECRET_VALUE = "hunter2-plain-env-value"


@pytest.fixture(scope="module")
def run(operator: str, kubectl: Kubectl) -> Iterator[Run]:
    """Serve one toy ModelDeployment to Ready and have one refused, then delete both."""
    ns = f"rbac-{uuid.uuid4().hex[:6]}"
    started = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
    kubectl.run("create", "namespace", ns)
    spec = {
        "model": toy_model("vllm"),
        "server": toy_server({"TOY_LLM_LOAD_DELAY_S": "0.5", "SOME_TOKEN": SECRET_VALUE}),
        "warmUp": {
            "count": 4,
            "concurrency": 2,
            "success": {"stableLastN": 2, "maxLatencyFactor": 3},
        },
        "minReplicas": 1,
        "maxReplicas": 1,
    }
    hostpath = {"volumes": [{"name": "host", "hostPath": {"path": "/"}}]}
    bad = {**spec, "server": {**spec["server"], "podTemplate": hostpath}}
    try:
        kubectl.apply(modeldeployment_body("toy", ns, spec))
        kubectl.apply(modeldeployment_body("bad", ns, bad))
        served = wait_until(
            lambda: (
                (md := kubectl.json("-n", ns, "get", "mdep", "toy"))
                and (md.get("status") or {}).get("readyReplicas") == 1
                and md
            ),
            timeout=240,
            what=f"ModelDeployment {ns}/toy with 1 warmed, ready replica",
        )
        refused = wait_until(
            lambda: (
                (md := kubectl.json("-n", ns, "get", "mdep", "bad"))
                and any(
                    c["type"] == "Degraded" and c["reason"] == "InvalidSpec"
                    for c in (md.get("status") or {}).get("conditions") or []
                )
                and md
            ),
            timeout=60,
            what=f"ModelDeployment {ns}/bad Degraded with reason InvalidSpec",
        )
        children = kubectl.run(
            "-n", ns, "get", "deploy,svc,pdb", "-l", "modelscale.dev/modeldeployment=bad",
            "-o", "name",
        ).stdout.split()  # fmt: skip
        time.sleep(12)  # at least one scaling pass over the served ModelDeployment
        kubectl.run("-n", ns, "delete", "mdep", "toy", "bad", "--wait=true", "--timeout=120s")
        time.sleep(2)  # the audit backend writes in batches
        yield Run(audited(), served, started, refused, children)
    finally:
        kubectl.run("delete", "namespace", ns, "--wait=false", check=False)


def test_a_hostpath_volume_is_refused_with_a_message_and_nothing_applied(run: Run) -> None:
    (degraded,) = [c for c in run.refused["status"]["conditions"] if c["type"] == "Degraded"]
    assert "spec.server.podTemplate.volumes[0].hostPath" in degraded["message"]
    assert "podSecurity.allowPrivileged=true" in degraded["message"]
    assert run.refused_children == []


def test_plain_env_values_are_not_copied_into_status(run: Run) -> None:
    assert run.served["status"]["kopf"]["lastHandledConfiguration"]  # kopf keeps it there
    assert SECRET_VALUE not in json.dumps(run.served["status"])


def test_no_request_of_the_operator_is_refused(run: Run) -> None:
    exercised = run.audited
    assert exercised, "no audited request of the operator: is the audit policy in effect?"
    refused = [
        (e["verb"], e.get("objectRef"), e["responseStatus"].get("code"))
        for e in exercised
        if e.get("responseStatus", {}).get("code") == 403
        and not _not_rbac(e)
        # Earlier modules of the session install and uninstall the chart too: a replica of
        # theirs outliving its release's Role is not this install's RBAC.
        and e.get("requestReceivedTimestamp", "") >= run.started
    ]
    assert refused == []


def _not_rbac(event: dict[str, Any]) -> bool:
    """A 403 that RBAC did not give: the audit log spans the whole e2e session, so it holds
    writes into other tests' namespaces while they were being deleted (NamespaceLifecycle
    answers 403 "being terminated"), and Lease calls of a replica that outlived its
    release's Role while helm uninstalled it. The authorizer's own decision is in the
    event's annotations."""
    decision = (event.get("annotations") or {}).get("authorization.k8s.io/decision")
    message = (event.get("responseStatus") or {}).get("message", "")
    return decision == "allow" or "being terminated" in message


def test_the_rules_equal_what_the_operator_uses(run: Run, kubectl: Kubectl) -> None:
    grants = granted(kubectl)
    used = used_by(run.audited)
    assert used - grants == set(), "calls the chart does not grant"
    unexplained = grants - used - set(NOT_EXERCISED)
    assert unexplained == set(), "grants nothing here uses and no path needs: drop them"
    stale = set(NOT_EXERCISED) - grants
    assert stale == set(), "NOT_EXERCISED lists rules the chart no longer grants"
    assert set(NOT_EXERCISED) & used == set(), "NOT_EXERCISED lists rules used here"
    # The table for the release note: every grant, used here or why not.
    for grant in sorted(grants):
        print(f"{'/'.join(grant):<60} {'used' if grant in used else NOT_EXERCISED[grant]}")
