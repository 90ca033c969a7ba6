"""Pod status the way the kubelet computes it (pkg/kubelet/status/generate.go)."""

from __future__ import annotations

from typing import Any

from harness import topology as topo
from harness.kubelet.common import now
from harness.kubelet.containers import Container

# The conditions this runtime owns; others (readiness gates) are never written here.
OWN_CONDITIONS = ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready")


def contains(desired: Any, observed: Any) -> bool:
    """Does `observed` already hold everything `desired` would patch (None = absent)?"""
    if desired is None:
        return observed is None or observed == {}
    if isinstance(desired, dict):
        if not isinstance(observed, dict):
            return False
        return all(contains(v, observed.get(k)) for k, v in desired.items())
    if isinstance(desired, list) and desired and isinstance(desired[0], dict):
        key = next((k for k in ("type", "name", "ip") if k in desired[0]), None)
        if key is None or not isinstance(observed, list):
            return bool(desired == observed)
        by_key = {o.get(key): o for o in observed if isinstance(o, dict)}
        return all(contains(d, by_key.get(d[key])) for d in desired)
    return bool(desired == observed)


def ready_conditions(
    *, pod: dict[str, Any], containers: list[dict[str, Any]], phase: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """ContainersReady and Ready exactly as pkg/kubelet/status/generate.go computes them:
    Ready needs every container ready AND every readiness gate present and True."""
    names = [c["name"] for c in pod["spec"]["containers"]]
    by_name = {c["name"]: c for c in containers}
    unknown = [n for n in names if n not in by_name]
    unready = [n for n in names if n in by_name and not by_name[n]["ready"]]
    if not containers:
        cr = {"status": "False", "reason": "UnknownContainerStatuses", "message": None}
    elif unknown or unready:
        parts = []
        if unknown:
            parts.append(f"containers with unknown status: [{' '.join(unknown)}]")
        if unready:
            parts.append(f"containers with unready status: [{' '.join(unready)}]")
        reason = "PodCompleted" if phase == "Succeeded" and not unknown else "ContainersNotReady"
        cr = {"status": "False", "reason": reason, "message": ", ".join(parts)}
    else:
        cr = {"status": "True", "reason": None, "message": None}
    if cr["status"] != "True":
        return cr, dict(cr)
    conds = {c["type"]: c for c in pod.get("status", {}).get("conditions") or []}
    gate_msgs = []
    for gate in pod["spec"].get("readinessGates") or []:
        t = gate["conditionType"]
        c = conds.get(t)
        if c is None:
            gate_msgs.append(f'corresponding condition of pod readiness gate "{t}" does not exist.')
        elif c.get("status") != "True":
            gate_msgs.append(
                f'the status of pod readiness gate "{t}" is not "True", but {c.get("status")}'
            )
    if gate_msgs:
        return cr, {
            "status": "False",
            "reason": "ReadinessGatesNotReady",
            "message": ", ".join(gate_msgs),
        }
    return cr, {"status": "True", "reason": None, "message": None}


def phase(containers: list[Container]) -> str:
    if any(c.unsupported or (c.proc is None and c.restart_count == 0) for c in containers):
        return "Pending"
    if all(c.done for c in containers):
        ok = all((c.last_terminated or {}).get("exitCode") == 0 for c in containers)
        return "Succeeded" if ok else "Failed"
    return "Running"


def desired(
    *,
    pod: dict[str, Any],
    containers: list[Container],
    node: topo.FakeNode,
    ip: str | None,
    start_time: str,
) -> dict[str, Any]:
    """The whole pod status this runtime owns; conditions keep their lastTransitionTime
    while their status does not change."""
    statuses = [c.status() for c in containers]
    pod_phase = phase(containers)
    cr, ready = ready_conditions(pod=pod, containers=statuses, phase=pod_phase)
    initialized = not pod["spec"].get("initContainers")
    own = {
        "PodReadyToStartContainers": {"status": "True" if ip else "False"},
        "Initialized": {"status": "True" if initialized else "False"},
        "ContainersReady": cr,
        "Ready": ready,
    }
    observed = {c["type"]: c for c in pod.get("status", {}).get("conditions") or []}
    conditions = []
    for ctype, cond in own.items():
        old = observed.get(ctype)
        same = old is not None and old.get("status") == cond["status"]
        conditions.append(
            {
                "type": ctype,
                "status": cond["status"],
                "reason": cond.get("reason"),
                "message": cond.get("message"),
                "lastProbeTime": None,
                "lastTransitionTime": old["lastTransitionTime"] if same and old else now(),
            }
        )
    status: dict[str, Any] = {
        "phase": pod_phase,
        "hostIP": node.internal_ip,
        "hostIPs": [{"ip": node.internal_ip}],
        "startTime": start_time,
        "conditions": conditions,
        "containerStatuses": statuses,
    }
    if ip:
        status["podIP"] = ip
        status["podIPs"] = [{"ip": ip}]
    return status
