"""The namespaced install on the real cluster: the chart with `watchNamespaces: [<one>]`
(a Role and RoleBinding in that namespace, no namespaced rights cluster-wide), the
operator running from it as a pod with the chart's ServiceAccount token.

- A ModelDeployment in the watched namespace is reconciled, warmed and scaled (the scaling
  loop writes its decision, the Deployment follows, the new pod is warmed before Ready).
- One in a namespace the install does not watch is left alone: no children, no status,
  and the operator does not even try (no request into that namespace, no 403 at all in the
  apiserver's audit log, no log line about it). Its log says at start which namespaces it
  watches, the line an admin looks for when a ModelDeployment does nothing.
- Every namespaced request it makes is into the watched namespace (or its Lease in its own
  namespace), and every (group, resource, verb) it used is granted by the namespaced
  install's rules.

The session's release (conftest `operator`) is upgraded to the namespaced mode for this
module and restored to its values afterwards.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from test_rbac_e2e import Grant, _not_rbac, audited, used_by
from toy_md import modeldeployment_body, pods_of, toy_model, toy_server

from harness import operator_chart
from harness.kubectl import Kubectl, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.local_runtime]

NS = operator_chart.OPERATOR_NAMESPACE
SELECTOR = "app.kubernetes.io/component=operator"
# Its own ServiceAccount: the audit log spans the e2e session, and the cluster-wide RBAC
# test must not count this module's calls (namespaces) as the cluster-wide install's.
SERVICE_ACCOUNT = "modelscale-namespaced"
USER = f"system:serviceaccount:{NS}:{SERVICE_ACCOUNT}"
STARTUP_LINE = "watching ModelDeployments only in namespaces {ns} (chart value watchNamespaces)"


def _helm(cluster: Any, *args: str) -> None:
    proc = subprocess.run(
        [str(cluster.bin_dir / "helm"), "--kubeconfig", str(cluster.kubeconfig), "-n", NS, *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert proc.returncode == 0, f"helm {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"


def _rolled_out(kubectl: Kubectl, replicas: int) -> None:
    """Only the new operator pods are left (a replica of the old install, still stopping,
    would make requests the new rules refuse)."""
    wait_until(
        lambda: len(kubectl.json("-n", NS, "get", "pods", "-l", SELECTOR)["items"]) == replicas,
        timeout=90,
        what=f"{replicas} operator pod(s), the old ones gone",
    )


def _granted(kubectl: Kubectl, watched: str) -> set[Grant]:
    roles = [
        kubectl.json("-n", watched, "get", "role", "modelscale"),
        kubectl.json("get", "clusterrole", "modelscale-cluster"),
        kubectl.json("-n", NS, "get", "role", "modelscale-leader-election"),
    ]
    return {
        (group, resource, verb)
        for role in roles
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


@dataclass(frozen=True)
class Run:
    watched: str
    unwatched: str
    scaled: dict[str, Any]
    """The watched ModelDeployment once scaled to 2 and both pods ready."""
    ignored: dict[str, Any]
    """The one in the unwatched namespace at the end."""
    ignored_children: list[str]
    audited: list[dict[str, Any]]
    """The operator's requests while namespaced (after the old pods were gone)."""
    granted: set[Grant]
    logs: str
    cluster_wide_install_rules: bool


@pytest.fixture(scope="module")
def run(cluster: Any, operator: str, kubectl: Kubectl) -> Iterator[Run]:
    with kubectl.namespace("watched") as watched, kubectl.namespace("unwatched") as unwatched:
        values = kubectl.run(
            "get", "secret", "-n", NS, "-l", "owner=helm,status=deployed", "-o", "name"
        )  # the release exists: `operator` installed it
        assert values.stdout.strip(), "no deployed helm release"
        saved = subprocess.run(
            [str(cluster.bin_dir / "helm"), "--kubeconfig", str(cluster.kubeconfig), "-n", NS,
             "get", "values", operator_chart.RELEASE, "-o", "json"],
            capture_output=True, text=True, check=True, timeout=60,
        ).stdout  # fmt: skip
        with tempfile.NamedTemporaryFile("w", suffix=".json") as saved_file:
            saved_file.write(saved)
            saved_file.flush()
            began = time.monotonic()
            try:
                yield _scenario(cluster, kubectl, watched=watched, unwatched=unwatched)
            finally:
                restoring = time.monotonic()
                _helm(
                    cluster, "upgrade", operator_chart.RELEASE, str(operator_chart.CHART),
                    "--reset-values", "-f", saved_file.name, "--wait", "--timeout", "180s",
                )  # fmt: skip
                _rolled_out(kubectl, int(json.loads(saved).get("replicas", 2)))
                done = time.monotonic()
                print(  # with -s: the module's cost inside `make test`
                    f"\nnamespaced module: {restoring - began:.1f} s scenario, "
                    f"{done - restoring:.1f} s restoring the release, {done - began:.1f} s in all"
                )


def _scenario(cluster: Any, kubectl: Kubectl, *, watched: str, unwatched: str) -> Run:
    began = time.monotonic()
    # One replica: the namespaced rules are what is tested here, not the failover.
    _helm(
        cluster, "upgrade", operator_chart.RELEASE, str(operator_chart.CHART), "--reuse-values",
        "--set-json", f'watchNamespaces=["{watched}"]', "--set", "replicas=1",
        "--set", f"serviceAccount.name={SERVICE_ACCOUNT}",
        "--wait", "--timeout", "180s",
    )  # fmt: skip
    _rolled_out(kubectl, 1)
    print(f"\nnamespaced install rolled out in {time.monotonic() - began:.1f} s")
    cluster_wide = kubectl.run("get", "clusterrole", "modelscale", check=False).returncode == 0
    started = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
    spec = {
        "model": toy_model("vllm"),
        "server": toy_server({"TOY_LLM_LOAD_DELAY_S": "0.5"}),
        "warmUp": {
            "count": 4,
            "concurrency": 2,
            "success": {"stableLastN": 2, "maxLatencyFactor": 3},
        },
        "minReplicas": 1,
        "maxReplicas": 2,
    }
    kubectl.apply(modeldeployment_body("toy", unwatched, spec))
    kubectl.apply(modeldeployment_body("toy", watched, spec))
    wait_until(
        lambda: (
            (kubectl.json("-n", watched, "get", "mdep", "toy").get("status") or {}).get(
                "readyReplicas"
            )
            == 1
        ),
        timeout=180,
        what=f"{watched}/toy with 1 warmed, ready replica",
    )
    # Scale up: the scaling loop's decision (status.desiredReplicas) and the Deployment.
    kubectl.run(
        "-n", watched, "patch", "mdep", "toy", "--type=merge", "-p", '{"spec":{"minReplicas":2}}'
    )
    scaled = wait_until(
        lambda: (
            (md := kubectl.json("-n", watched, "get", "mdep", "toy"))
            and (md.get("status") or {}).get("desiredReplicas") == 2
            and md["status"].get("readyReplicas") == 2
            and md
        ),
        timeout=120,
        what=f"{watched}/toy scaled to 2 warmed, ready replicas",
    )
    ignored = kubectl.json("-n", unwatched, "get", "mdep", "toy")
    children = kubectl.run(
        "-n", unwatched, "get", "deploy,svc,pdb,pods", "-o", "name"
    ).stdout.split()
    logs = kubectl.run("-n", NS, "logs", "-l", SELECTOR, "--tail=-1").stdout
    time.sleep(2)  # the audit backend writes in batches
    since = [e for e in audited(USER) if e.get("requestReceivedTimestamp", "") >= started]
    return Run(
        watched=watched,
        unwatched=unwatched,
        scaled=scaled,
        ignored=ignored,
        ignored_children=children,
        audited=since,
        granted=_granted(kubectl, watched),
        logs=logs,
        cluster_wide_install_rules=cluster_wide,
    )


def test_the_install_grants_nothing_namespaced_cluster_wide(run: Run) -> None:
    assert not run.cluster_wide_install_rules, "the cluster-wide ClusterRole is still there"


def test_a_modeldeployment_in_the_watched_namespace_is_served_and_scaled(
    run: Run, kubectl: Kubectl
) -> None:
    status = run.scaled["status"]
    assert (status["desiredReplicas"], status["readyReplicas"]) == (2, 2)
    pods = pods_of(kubectl, run.watched, "toy")
    gates = [
        c["status"]
        for p in pods
        for c in p["status"].get("conditions", [])
        if c["type"] == "modelscale.dev/warmed-up"
    ]
    assert gates == ["True", "True"], "both pods warmed by the operator before Ready"


def test_one_in_an_unwatched_namespace_is_left_alone(run: Run) -> None:
    assert "status" not in run.ignored, "the operator wrote status it may not write"
    assert run.ignored_children == []


def test_the_operator_does_not_even_try_the_unwatched_namespace(run: Run) -> None:
    assert run.audited, "no audited request of the operator: is the audit policy in effect?"
    into = [e for e in run.audited if (e.get("objectRef") or {}).get("namespace") == run.unwatched]
    assert into == []
    refused = [
        (e["verb"], e.get("objectRef"))
        for e in run.audited
        if e.get("responseStatus", {}).get("code") == 403 and not _not_rbac(e)
    ]
    assert refused == [], "requests refused by RBAC: an error storm in the making"
    assert run.unwatched not in run.logs
    for level in (" ERROR ", "Forbidden"):
        assert level not in run.logs, f"{level.strip()} in the operator's log"


def test_its_log_says_which_namespaces_it_watches(run: Run) -> None:
    assert STARTUP_LINE.format(ns=run.watched) in run.logs


def test_namespaced_requests_stay_in_the_watched_namespace_and_are_granted(run: Run) -> None:
    cluster_scoped = {"nodes", "namespaces", "customresourcedefinitions"}
    outside = sorted(
        {
            (e["verb"], ref.get("resource"), ref.get("namespace"))
            for e in run.audited
            if (ref := e.get("objectRef") or {}).get("resource")
            and ref["resource"] not in cluster_scoped
            and ref.get("namespace") not in (run.watched, NS)
        }
    )
    assert outside == [], "namespaced calls outside the watched namespace (or cluster-wide)"
    in_own = {
        (e.get("objectRef") or {}).get("resource")
        for e in run.audited
        if (e.get("objectRef") or {}).get("namespace") == NS
    }
    assert in_own <= {"leases"}, f"calls in {NS} beyond the Lease: {in_own}"
    assert used_by(run.audited) - run.granted == set(), "calls the namespaced rules lack"
