"""HA on the local cluster: two operator replicas from the chart, one leader by Lease.

The leader's process is SIGKILLed (as the OOM killer or a dead node would); the figures
are measured from the kill to what the surviving replica does:

- it holds the Lease (`holderIdentity` names it);
- its first scaling pass (its `modelscale_autoscaler_loop_duration_seconds_count` moves:
  a follower's loop never runs a pass);
- its first warm-up (its `modelscale_warmups_in_flight` rises) of a pod the dead leader
  was warming when it died, and the moment that pod's gate opens.

And what must never happen, watched on every pod event: a gate that goes back from True
to False (an old leader closing what the new one opened), a gate True without the
restart-count annotation that re-closes it after a container restart (the two are one
write), or two warm-ups of one pod (one `WarmedUp` event per pod). The figures are
printed (`-s`) and recorded in docs/operations.md."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, watch
from toy_md import modeldeployment_body, toy_model, toy_server

from harness.kubectl import Kubectl, wait_until
from modelscale import podfacts

pytestmark = [pytest.mark.cluster, pytest.mark.local_runtime]

OPERATOR_NS = "modelscale-system"
LEASE = "modelscale-leader"
GATE = podfacts.CONDITION_TYPE
GOAL_SECONDS = 15.0
# A cold toy model: the first 6 requests take 1.5 s more each, so a warm-up lasts ~10 s
# and the leader can be killed in the middle of one.
COLD_ENV = {"TOY_LLM_COLD_REQUESTS": "6", "TOY_LLM_COLD_PENALTY_S": "1.5"}


def modeldeployment(name: str, namespace: str, *, replicas: int) -> dict[str, Any]:
    return modeldeployment_body(
        name,
        namespace,
        {
            "model": toy_model("python"),
            "server": toy_server(COLD_ENV),
            "replicas": replicas,
            "minReplicas": 1,
            "maxReplicas": 3,
            "scaling": {"mode": "External"},
            "warmUp": {
                "protocol": "GRPC",
                "count": 4,
                "concurrency": 1,
                "success": {"stableLastN": 3, "maxLatencyFactor": 1.5},
            },
        },
    )


# --------------------------------------------------------------------------- observers


class GateWatch:
    """Every pod event in the namespace: gate history per pod uid, and any event with the
    gate True but no restart-count annotation."""

    def __init__(self, kube_api: Any, namespace: str) -> None:
        self.history: dict[str, list[tuple[str, str]]] = {}
        self.open_without_bookkeeping: list[str] = []
        self._stop = threading.Event()
        self._watch = watch.Watch()  # type: ignore[no-untyped-call]
        self._thread = threading.Thread(target=self._run, args=(kube_api, namespace), daemon=True)
        self._thread.start()

    def _run(self, kube_api: Any, namespace: str) -> None:
        core = client.CoreV1Api(kube_api)
        while not self._stop.is_set():
            try:
                for event in self._watch.stream(
                    core.list_namespaced_pod, namespace, timeout_seconds=30
                ):
                    pod = kube_api.sanitize_for_serialization(event["object"])
                    facts = podfacts.read(pod)
                    cond = facts.warmed_condition
                    if cond is None:
                        continue
                    seen = self.history.setdefault(facts.uid, [])
                    if not seen or seen[-1] != (cond.status, cond.reason or ""):
                        seen.append((cond.status, cond.reason or ""))
                    restarts = facts.annotations.get(podfacts.ANNOTATION_WARMED_RESTARTS)
                    if cond.status == "True" and restarts is None:
                        self.open_without_bookkeeping.append(facts.name)
                    if self._stop.is_set():
                        return
            except Exception:  # a watch that expired: start again
                time.sleep(0.2)

    def closed_after_open(self) -> dict[str, list[tuple[str, str]]]:
        out = {}
        for uid, seen in self.history.items():
            statuses = [s for s, _ in seen]
            if "True" in statuses and "False" in statuses[statuses.index("True") :]:
                out[uid] = seen
        return out

    def stop(self) -> None:
        self._stop.set()
        self._watch.stop()  # type: ignore[no-untyped-call]


def lease_holder(kube_api: Any) -> str:
    lease = client.CoordinationV1Api(kube_api).read_namespaced_lease(LEASE, OPERATOR_NS)
    return str(lease.spec.holder_identity or "")


def operator_pods(kubectl: Kubectl) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = kubectl.json(
        "-n", OPERATOR_NS, "get", "pods", "-l", "app.kubernetes.io/component=operator"
    )["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def pod_named(kubectl: Kubectl, holder: str) -> dict[str, Any]:
    """The operator pod whose process holds the lease (identity = `<pod>_<random>`)."""
    name = holder.rsplit("_", 1)[0]
    (pod,) = [p for p in operator_pods(kubectl) if p["metadata"]["name"] == name]
    return pod


def metric(ip: str, name: str) -> float:
    text = urllib.request.urlopen(f"http://{ip}:8080/metrics", timeout=2).read().decode()
    found = re.search(rf"^{re.escape(name)}(?:{{[^}}]*}})? ([0-9.e+-]+)$", text, flags=re.M)
    return float(found.group(1)) if found else 0.0


def kill_process(pod: dict[str, Any]) -> None:
    cid = pod["status"]["containerStatuses"][0]["containerID"]
    pid = int(cid.removeprefix("harness://"))
    os.killpg(pid, signal.SIGKILL)  # the operator and everything it started, no clean-up


def both_operators_ready(kubectl: Kubectl) -> bool:
    pods = operator_pods(kubectl)
    return len(pods) == 2 and all(
        c["type"] != "Ready" or c["status"] == "True"
        for p in pods
        for c in p["status"].get("conditions", [])
    )


def md_pods(kubectl: Kubectl, ns: str, name: str = "toy") -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = kubectl.json(
        "-n", ns, "get", "pods", "-l", f"{podfacts.MD_LABEL}={name}"
    )["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def warmed_up_events(kubectl: Kubectl, ns: str) -> dict[str, int]:
    events = kubectl.json("-n", ns, "get", "events", "--field-selector", "reason=WarmedUp")
    out: dict[str, int] = {}
    for e in events["items"]:
        name = e["involvedObject"]["name"]
        out[name] = out.get(name, 0) + int(e.get("count") or 1)
    return out


@pytest.fixture
def gates(kube_api: Any, namespace: str) -> Iterator[GateWatch]:
    w = GateWatch(kube_api, namespace)
    yield w
    w.stop()


# --------------------------------------------------------------------------- the test


def test_leader_killed_mid_warm_up_the_other_replica_takes_over(
    operator: str, kubectl: Kubectl, kube_api: Any, namespace: str, gates: GateWatch
) -> None:
    wait_until(lambda: both_operators_ready(kubectl), timeout=120, what="two operator pods Ready")
    holder = wait_until(lambda: lease_holder(kube_api), timeout=60, what="a leader")
    kubectl.apply(modeldeployment("toy", namespace, replicas=1))
    wait_until(
        lambda: [p for p in md_pods(kubectl, namespace) if podfacts.read(p).warmed],
        timeout=180,
        what="the first pod warmed by the leader",
    )
    # A second pod, and the leader dies while warming it up.
    kubectl.run(
        "-n", namespace, "patch", "mdep", "toy", "--type=merge", "-p", '{"spec":{"replicas":2}}'
    )

    def warming() -> dict[str, Any] | None:
        for p in md_pods(kubectl, namespace):
            cond = podfacts.read(p).warmed_condition
            if cond is not None and cond.status == "False" and "warming up" in cond.message:
                return p
        return None

    target = wait_until(warming, timeout=120, what="the second pod warming up", interval=0.2)
    holder = lease_holder(kube_api)
    leader = pod_named(kubectl, holder)
    (survivor,) = [
        p for p in operator_pods(kubectl) if p["metadata"]["name"] != leader["metadata"]["name"]
    ]
    ip = survivor["status"]["podIP"]
    loop_count = "modelscale_autoscaler_loop_duration_seconds_count"
    passes_before = metric(ip, loop_count)
    assert metric(ip, "modelscale_warmups_in_flight") == 0, "a follower is warming up"

    kill_process(leader)
    killed = time.monotonic()
    took: dict[str, float] = {}
    deadline = killed + 90
    while time.monotonic() < deadline and len(took) < 3:
        now = time.monotonic()
        if "lease" not in took and lease_holder(kube_api).startswith(
            survivor["metadata"]["name"] + "_"
        ):
            took["lease"] = now - killed
        try:
            if "pass" not in took and metric(ip, loop_count) > passes_before:
                took["pass"] = now - killed
            if "warm-up" not in took and metric(ip, "modelscale_warmups_in_flight") >= 1:
                took["warm-up"] = now - killed
        except OSError:
            pass
        time.sleep(0.1)

    target_uid = target["metadata"]["uid"]

    def target_warmed() -> bool:
        return any(
            p["metadata"]["uid"] == target_uid and podfacts.read(p).warmed
            for p in md_pods(kubectl, namespace)
        )

    wait_until(target_warmed, timeout=120, what="the pod the dead leader was warming, warmed")
    took["gate open"] = time.monotonic() - killed
    print(
        "\nfailover after SIGKILL of the leader: "
        + ", ".join(f"{k} {v:.1f} s" for k, v in took.items())
    )
    assert set(took) >= {"lease", "pass", "warm-up"}, took
    assert took["lease"] <= GOAL_SECONDS, took
    assert took["pass"] <= GOAL_SECONDS, took
    assert took["warm-up"] <= GOAL_SECONDS, took

    # The killed replica came back (restarted container) as a follower: one leader.
    wait_until(lambda: both_operators_ready(kubectl), timeout=120, what="the killed one back")
    assert lease_holder(kube_api).startswith(survivor["metadata"]["name"] + "_")
    assert metric(ip, "modelscale_leader") == 1
    leader_ip = pod_named(kubectl, lease_holder(kube_api)).get("status", {}).get("podIP")
    back = [p for p in operator_pods(kubectl) if p["status"].get("podIP") != leader_ip]
    assert [metric(p["status"]["podIP"], "modelscale_leader") for p in back] == [0]
    # Nothing was done twice or undone.
    assert gates.closed_after_open() == {}
    assert gates.open_without_bookkeeping == []
    counts = warmed_up_events(kubectl, namespace)
    assert counts and all(n == 1 for n in counts.values()), counts

    # The Deployment deleted by hand: the leader recreates it (and the pods are warmed).
    old_uid = kubectl.json("-n", namespace, "get", "deploy", "toy")["metadata"]["uid"]
    kubectl.run("-n", namespace, "delete", "deploy", "toy", "--wait=false")
    deleted = time.monotonic()

    def recreated() -> bool:
        proc = kubectl.run("-n", namespace, "get", "deploy", "toy", "-o", "json", check=False)
        return proc.returncode == 0 and f'"uid": "{old_uid}"' not in proc.stdout

    wait_until(recreated, timeout=60, what="the deleted Deployment recreated")
    print(f"deleted Deployment recreated after {time.monotonic() - deleted:.1f} s")
    wait_until(
        lambda: len([p for p in md_pods(kubectl, namespace) if podfacts.read(p).warmed]) == 2,
        timeout=180,
        what="two warmed pods again",
    )
    assert gates.closed_after_open() == {}
    assert gates.open_without_bookkeeping == []


def test_a_concurrent_writer_does_not_stop_convergence(
    operator: str, kubectl: Kubectl, kube_api: Any, namespace: str
) -> None:
    """Another writer bumps the ModelDeployment and its Deployment every 10 ms (each write
    moves their resourceVersion, so the operator's guarded writes meet 409 Conflicts); a
    scale to 2 still lands, warmed, and the status says so. Until the guarded writes read
    again on a conflict and go on while what they decided from is unchanged, a writer every
    25 ms kept both the apply and the status out for minutes here (every 50 ms did in CI of
    2026-12-03, on a loaded machine); tests/integration/test_*_conflicts_apiserver.py pin
    the two mechanisms one conflict at a time."""
    kubectl.apply(modeldeployment("busy", namespace, replicas=1))
    wait_until(
        lambda: [p for p in md_pods(kubectl, namespace, "busy") if podfacts.read(p).warmed],
        timeout=180,
        what="the first pod warmed",
    )
    custom, apps = client.CustomObjectsApi(kube_api), client.AppsV1Api(kube_api)
    stop, writes = threading.Event(), [0]

    def bump() -> None:
        while not stop.is_set():
            patch = {"metadata": {"annotations": {"test.modelscale.dev/bump": str(writes[0])}}}
            custom.patch_namespaced_custom_object(
                "modelscale.dev", "v1alpha1", namespace, "modeldeployments", "busy", patch
            )
            apps.patch_namespaced_deployment("busy", namespace, patch)
            writes[0] += 1
            time.sleep(0.01)

    writer = threading.Thread(target=bump, daemon=True)
    writer.start()
    try:
        started = time.monotonic()
        kubectl.run(
            "-n",
            namespace,
            "patch",
            "mdep",
            "busy",
            "--type=merge",
            "-p",
            '{"spec":{"replicas":2}}',
        )

        seen: list[object] = []

        def converged() -> bool:
            md = kubectl.json("-n", namespace, "get", "mdep", "busy")
            dep = kubectl.json("-n", namespace, "get", "deploy", "busy")
            status = md.get("status") or {}
            seen[:] = [dep["spec"]["replicas"], status.get("warmedReplicas")]
            return bool(dep["spec"]["replicas"] == 2 and status.get("warmedReplicas") == 2)

        # The second pod gets the first one's start budget (180 s): on a loaded 2-core CI
        # machine 120 s was once not enough to start and warm it (CI of 2026-12-02).
        try:
            wait_until(converged, timeout=180, what="2 warmed replicas in status despite conflicts")
        except AssertionError as err:
            raise AssertionError(f"{err} (Deployment replicas, warmedReplicas: {seen})") from err
        took = time.monotonic() - started
    finally:
        stop.set()
        writer.join(timeout=10)
    print(f"\nconverged to 2 warmed replicas in {took:.1f} s under {writes[0]} concurrent writes")
    assert writes[0] > 20, "the concurrent writer did not run"
