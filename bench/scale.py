"""`make bench-scale`: many ModelDeployments against one operator on the local cluster.

Creates `MODELDEPLOYMENTS` (default 1,000) ModelDeployments in `NAMESPACES` (default 10)
namespaces, minReplicas 1–3: all but `REAL` (default 3) have their pods on API-only nodes
(the harness pod runtime marks them Running/Ready with an IP and runs no process,
`e2e/harness/kubelet/apionly.py`); the `REAL` ones run the toy Triton. Once every pod the
ModelDeployments ask for is Ready, it samples the operator for `SOAK_SECONDS` (default
600) and reports: scaling pass duration (p50/p99/max), operator RSS (peak, first, last),
Kubernetes API requests per minute by method by verb and resource (the operator's
own client counter `modelscale_kube_requests_total`; kopf's watches, patches and events
are not in it),
status writes per minute, open TCP connections of the operator, asyncio tasks and
threads. Results to bench/results/scale.json; docs/scale.md shows them.

Run it with the cluster lock held (COMMON e2e pattern); it brings the cluster up itself."""

from __future__ import annotations

import json
import os
import pathlib
import statistics
import subprocess
import sys
import time
import urllib.request
from typing import Any

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "e2e"), str(REPO / "operator")]

from kubernetes import client, config  # noqa: E402
from kubernetes.client.exceptions import ApiException  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from harness import cluster as _cluster  # noqa: E402
from harness import operator_chart  # noqa: E402
from harness.kubectl import Kubectl  # noqa: E402
from harness.kubelet import apionly  # noqa: E402
from harness.kubelet.common import POD_LOGS, PODS  # noqa: E402

MODELDEPLOYMENTS = int(os.environ.get("MODELDEPLOYMENTS", "1000"))
NAMESPACES = int(os.environ.get("NAMESPACES", "10"))
REAL = int(os.environ.get("REAL", "3"))
SOAK_SECONDS = float(os.environ.get("SOAK_SECONDS", "600"))
CONVERGE_SECONDS = float(os.environ.get("CONVERGE_SECONDS", "1800"))
# Memory diagnostics (docs/scale.md): a report in the operator's log every
# MEMORY_REPORT seconds, tracemalloc with TRACEMALLOC frames; ARENA_MAX sets the chart's
# mallocArenaMax ("null": glibc's default), for before/after figures.
MEMORY_REPORT = os.environ.get("MEMORY_REPORT", "")
TRACEMALLOC = os.environ.get("TRACEMALLOC", "")
ARENA_MAX = os.environ.get("ARENA_MAX", "")
SAMPLE_SECONDS = 5.0
INTERVAL = 15  # the chart's default scaling interval
BULK_NODES = 4
RESULTS = REPO / "bench" / "results" / "scale.json"
TRITON_IMAGE = "nvcr.io/nvidia/tritonserver:24.10-py3"


def log(msg: str) -> None:
    print(f"[bench-scale {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def md_body(name: str, ns: str, *, min_replicas: int, real: bool) -> dict[str, Any]:
    server: dict[str, Any] = {
        "image": TRITON_IMAGE,
        "gpus": 1,
        "drainSeconds": 1,
        "terminationGracePeriodSeconds": 10,
    }
    if real:
        server["env"] = [{"name": "TOY_LLM_LOAD_DELAY_S", "value": "0.5"}]
    else:
        server["nodeSelector"] = {apionly.LABEL: "true"}
        server["tolerations"] = [apionly.TOLERATION]
    return {
        "apiVersion": "modelscale.dev/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "model": {"name": "toy_llm", "repository": "/models", "backend": "python"},
            "server": server,
            "minReplicas": min_replicas,
            "maxReplicas": 4,
            "warmUp": {
                "count": 4,
                "concurrency": 2,
                "success": {"stableLastN": 2, "maxLatencyFactor": 3},
            },
        },
    }


def scrape(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
    return out


APISERVER_RESOURCES = frozenset(
    {"pods", "modeldeployments", "deployments", "services", "poddisruptionbudgets",
     "secrets", "events", "nodes"}
)  # fmt: skip


def apiserver_requests(kubectl: Kubectl) -> dict[str, float]:
    """`apiserver_request_total` by verb and resource (all clients: the operator, kopf,
    the controllers, the harness kubelet), watches left out."""
    text = kubectl.run("get", "--raw", "/metrics").stdout
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name != "apiserver_request":
            continue
        for s in family.samples:
            verb, resource = s.labels.get("verb", ""), s.labels.get("resource", "")
            sub = s.labels.get("subresource", "")
            if s.name.endswith("_total") and verb != "WATCH" and resource in APISERVER_RESOURCES:
                key = f"{verb.lower()} {resource}{'/' + sub if sub else ''}"
                out[key] = out.get(key, 0.0) + s.value
    return out


def connections(pid: int) -> int:
    """ESTABLISHED TCP sockets in the operator's network namespace (it is alone there)."""
    n = 0
    for table in ("tcp", "tcp6"):
        path = pathlib.Path(f"/proc/{pid}/net/{table}")
        if path.exists():
            n += sum(1 for line in path.read_text().splitlines()[1:] if line.split()[3] == "01")
    return n


def wait_for_operator(core: Any) -> Any:
    """The operator pod once Ready (helm's --wait passes at once with one replica and a
    maxUnavailable of 1)."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        for pod in core.list_namespaced_pod(operator_chart.OPERATOR_NAMESPACE).items:
            conditions = pod.status.conditions or ()
            ready = any(c.type == "Ready" and c.status == "True" for c in conditions)
            if ready and not pod.metadata.deletion_timestamp:
                return pod
        time.sleep(2)
    raise SystemExit("the operator pod was not Ready within 180 s")


def operator_pid(core: Any, pod: Any) -> int:
    """The operator's process: the harness pod runtime names it in the containerID (and
    in the pod directory's pid file); polled, the status may lag the Ready condition."""
    name = pod.metadata.name
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        fresh = core.read_namespaced_pod(name, operator_chart.OPERATOR_NAMESPACE)
        for status in fresh.status.container_statuses or ():
            if (status.container_id or "").startswith("harness://"):
                return int(status.container_id.removeprefix("harness://"))
        for pid_file in PODS.glob(f"{operator_chart.OPERATOR_NAMESPACE}_{name}_*/*.pid"):
            return int(pid_file.read_text().split()[0])
        time.sleep(2)
    statuses = [(s.name, s.container_id, s.ready) for s in fresh.status.container_statuses or ()]
    logs = sorted(POD_LOGS.glob(f"{operator_chart.OPERATOR_NAMESPACE}_{name}_*.log"))
    tail = logs[-1].read_text()[-3000:] if logs else "(no log)"
    raise SystemExit(f"the operator pod {name} names no process after 60 s: {statuses}\n{tail}")


def diagnostics() -> list[str]:
    """`helm install` arguments for the memory diagnostics asked for, if any."""
    env = {"MODELSCALE_MEMORY_REPORT_SECONDS": MEMORY_REPORT, "PYTHONTRACEMALLOC": TRACEMALLOC}
    out: list[str] = []
    for i, (name, value) in enumerate((k, v) for k, v in env.items() if v):
        out += ["--set", f"extraEnv[{i}].name={name}"]
        out += ["--set-string", f"extraEnv[{i}].value={value}"]
    return out


def last_memory_report(pod: Any) -> str | None:
    """The newest memory report in the operator pod's log (MEMORY_REPORT set)."""
    logs = sorted(POD_LOGS.glob(f"{operator_chart.OPERATOR_NAMESPACE}_{pod.metadata.name}_*.log"))
    text = "\n".join(path.read_text(errors="replace") for path in logs)
    start = text.rfind("memory report:")
    if start < 0:
        return None
    report = []
    for line in text[start:].splitlines()[1:]:
        if not (line.startswith("  ") or line.startswith("traced ")):
            break
        report.append(line)
    return "\n".join(report) or None


def current_operator(core: Any, op: Any, pid: int) -> tuple[Any, int]:
    """The operator pod and its process as of now: the process id changes when the
    container restarts, the pod when it is replaced."""
    try:
        return op, operator_pid(core, op)
    except (SystemExit, ApiException):
        fresh = wait_for_operator(core)
        return fresh, operator_pid(core, fresh)


def events_since(core: Any, *, namespaces: list[str], since: float) -> dict[str, int]:
    """Events created in `namespaces` since `since` (wall time), by reason and source
    (`modelscale` or other): which events repeat at steady state."""
    out: dict[str, int] = {}
    for ns in namespaces:
        for ev in core.list_namespaced_event(ns).items:
            created = ev.metadata.creation_timestamp
            if created is None or created.timestamp() < since:
                continue
            source = (ev.source.component if ev.source else None) or ev.reporting_component
            key = f"{ev.reason} ({source or '?'})"
            if key not in out:
                log(f"event {key} on {ns}/{ev.involved_object.name}: {ev.message}")
            out[key] = out.get(key, 0) + 1
    return out


def drift(t: list[float], values: list[float]) -> dict[str, float]:
    """Flatness over the soak: the mean of the first and of the last minute, and the
    least-squares slope per minute over all of it."""
    if not values:
        return {}
    first = [v for x, v in zip(t, values, strict=True) if x <= t[0] + 60] or values[:1]
    last = [v for x, v in zip(t, values, strict=True) if x >= t[-1] - 60] or values[-1:]
    n = len(values)
    mt, mv = sum(t) / n, sum(values) / n
    var = sum((x - mt) ** 2 for x in t)
    slope = sum((x - mt) * (v - mv) for x, v in zip(t, values, strict=True)) / var if var else 0.0
    return {
        "first_minute": round(statistics.fmean(first), 2),
        "last_minute": round(statistics.fmean(last), 2),
        "slope_per_minute": round(slope * 60, 3),
    }


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else 0.0


def main() -> int:
    with _cluster.session() as info:
        config.load_kube_config(config_file=str(info.kubeconfig))
        core, objects = client.CoreV1Api(), client.CustomObjectsApi()
        helm = [str(info.bin_dir / "helm"), "--kubeconfig", str(info.kubeconfig)]
        helm += ["-n", operator_chart.OPERATOR_NAMESPACE]
        for i in range(BULK_NODES):
            body = apionly.node_body(f"bulk-{i}", zone=f"zone-{1 + i % 2}")
            try:
                core.create_node(body)
            except ApiException as err:
                if err.status != 409:
                    raise
            core.patch_node_status(body["metadata"]["name"], {"status": body["status"]})
        subprocess.run(
            [*helm, "uninstall", operator_chart.RELEASE, "--wait"], capture_output=True, check=False
        )
        proc = subprocess.run(
            [
                *helm,
                *operator_chart.install_args(
                    prometheus_url=info.prometheus_url,
                    values=(f"autoscaler.intervalSeconds={INTERVAL}", "replicas=1",
                            "leaderElection.enabled=false", "logLevel=WARNING",
                            *((f"mallocArenaMax={ARENA_MAX}",) if ARENA_MAX else ())),
                ),
                *diagnostics(),
            ],
            capture_output=True, text=True, check=False, timeout=300,
        )  # fmt: skip
        if proc.returncode != 0:
            raise SystemExit(f"helm install failed: {proc.stdout}{proc.stderr}")
        op = wait_for_operator(core)
        pid = operator_pid(core, op)
        want = 0
        created = time.monotonic()
        namespaces = [f"scale-{i}" for i in range(NAMESPACES)]
        for ns in namespaces:
            try:
                core.create_namespace({"metadata": {"name": ns}})
            except ApiException as err:
                if err.status != 409:
                    raise
        for i in range(MODELDEPLOYMENTS):
            ns = namespaces[i % NAMESPACES]
            min_replicas = 1 + i % 3
            real = i < REAL
            want += 1 if real else min_replicas
            try:
                objects.create_namespaced_custom_object(
                    "modelscale.dev", "v1alpha1", ns, "modeldeployments",
                    md_body(f"md-{i}", ns, min_replicas=1 if real else min_replicas, real=real),
                )  # fmt: skip
            except ApiException as err:
                if err.status != 409:
                    raise
        log(f"created {MODELDEPLOYMENTS} ModelDeployments in {time.monotonic() - created:.0f} s")
        samples: list[dict[str, Any]] = []
        deadline = time.monotonic() + CONVERGE_SECONDS
        converged_all = True
        while True:
            pods = core.list_pod_for_all_namespaces(label_selector="modelscale.dev/modeldeployment")
            ready = sum(
                1
                for p in pods.items
                if p.metadata.namespace.startswith("scale-")
                and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or ())
            )
            log(f"{ready}/{want} pods Ready")
            if ready >= want:
                break
            if time.monotonic() > deadline:
                # Measured anyway, and said so: a lock slot is too short to wait longer.
                log(f"not converged after {CONVERGE_SECONDS:.0f} s: {ready}/{want} pods Ready")
                converged_all = False
                break
            time.sleep(10)
        converged = time.monotonic() - created
        log(f"converged in {converged:.0f} s; soaking {SOAK_SECONDS:.0f} s")
        kubectl = Kubectl(info.bin_dir, info.kubeconfig)
        api_before = apiserver_requests(kubectl)
        soak_wall = time.time()
        start = time.monotonic()
        last_pass_at = None
        prev: tuple[float, float] | None = None
        passes: list[float] = []
        while time.monotonic() - start < SOAK_SECONDS:
            m = scrape(f"http://{op.status.pod_ip}:8080/metrics")
            at = m.get("modelscale_autoscaler_last_pass_timestamp_seconds")
            if at != last_pass_at:
                last_pass_at = at
                if "modelscale_autoscaler_last_pass_duration_seconds" in m:
                    passes.append(m["modelscale_autoscaler_last_pass_duration_seconds"])
                else:  # an operator without that gauge: the passes since the last sample
                    total = m["modelscale_autoscaler_loop_duration_seconds_sum"]
                    count = m["modelscale_autoscaler_loop_duration_seconds_count"]
                    if prev is not None and count > prev[1]:
                        passes.append((total - prev[0]) / (count - prev[1]))
                    prev = (total, count)
            # The running operator's process each sample: a restarted container has a new
            # one (following the first pid read 0 connections after a restart).
            op, pid = current_operator(core, op, pid)
            samples.append(
                {
                    "t": round(time.monotonic() - start, 1),
                    "metrics": m,
                    "connections": connections(pid),
                }
            )

            time.sleep(SAMPLE_SECONDS)
        api_after = apiserver_requests(kubectl)
        api_minutes = (time.monotonic() - start) / 60
        soak_events = events_since(core, namespaces=namespaces, since=soak_wall)
        first, last = samples[0], samples[-1]
        minutes = (last["t"] - first["t"]) / 60 or 1.0

        def rate(name: str) -> float:
            return round(
                (last["metrics"].get(name, 0) - first["metrics"].get(name, 0)) / minutes, 1
            )

        requests = sorted(
            k for k in last["metrics"] if k.startswith("modelscale_kube_requests_total{")
        )
        rss = [s["metrics"]["process_resident_memory_bytes"] / 2**20 for s in samples]
        series = {
            "rss_mib": [round(v, 1) for v in rss],
            "connections": [s["connections"] for s in samples],
            "asyncio_tasks": [s["metrics"].get("modelscale_asyncio_tasks", 0) for s in samples],
            "threads": [s["metrics"].get("modelscale_threads", 0) for s in samples],
            "open_fds": [s["metrics"].get("process_open_fds", 0) for s in samples],
            "t": [s["t"] for s in samples],
            "status_writes": [
                s["metrics"].get("modelscale_status_writes_total", 0) for s in samples
            ],
            "passes": passes,
        }
        result = {
            "modeldeployments": MODELDEPLOYMENTS,
            "real": REAL,
            "pods": want,
            "namespaces": NAMESPACES,
            "scaling_interval_seconds": INTERVAL,
            "soak_seconds": SOAK_SECONDS,
            "converged_seconds": round(converged),
            "converged": converged_all,
            "pass_seconds": {
                "passes": len(passes),
                "p50": round(statistics.median(passes), 2) if passes else None,
                "p99": round(pct(passes, 0.99), 2),
                "max": round(max(passes, default=0.0), 2),
            },
            "rss_mib": {
                "first": series["rss_mib"][0],
                "last": series["rss_mib"][-1],
                "peak": max(series["rss_mib"]),
            },
            "kube_requests_per_minute": {
                k.split("{", 1)[1].rstrip("}"): rate(k) for k in requests if rate(k) > 0
            },
            "apiserver_requests_per_minute": {
                k: round((v - api_before.get(k, 0.0)) / api_minutes, 1)
                for k, v in sorted(api_after.items())
                if v - api_before.get(k, 0.0) > 0
            },
            "soak_drift": {
                key: drift(series["t"], [float(v) for v in series[key]])
                for key in ("rss_mib", "connections", "asyncio_tasks", "threads", "open_fds")
            },
            "events_per_minute_by_reason": {
                reason: round(n / api_minutes, 1) for reason, n in sorted(soak_events.items())
            },
            "status_writes_per_minute": rate("modelscale_status_writes_total"),
            "status_writes_skipped_per_minute": rate("modelscale_status_writes_skipped_total"),
            "status_write_conflicts_per_minute": {
                writer: rate(f"modelscale_status_write_conflicts_total{{writer={writer}}}")
                for writer in ("scaling", "reconcile")
            },
            "series": series,
            "source": "the operator's own /metrics (its client's request counter) and "
            "/proc/<pid>/net/tcp of its network namespace",
        }
        report = last_memory_report(op)
        if report:
            result["memory_report"] = report.splitlines()
            print(report)
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(result, indent=1) + "\n")
        summary = {k: v for k, v in result.items() if k != "series"}
        print(json.dumps(summary, indent=1))
        print(table(result))
        for key in ("connections", "asyncio_tasks", "threads", "open_fds"):
            vals = series[key]
            print(f"{key}: first {vals[0]} last {vals[-1]} max {max(vals)}")
        for ns in namespaces:
            core.delete_namespace(ns)
        subprocess.run(
            [*helm, "uninstall", operator_chart.RELEASE, "--wait"], capture_output=True, check=False
        )
        for i in range(BULK_NODES):
            core.delete_node(f"bulk-{i}")
    return 0


def table(result: dict[str, Any]) -> str:
    """The docs/scale.md table of one result."""
    p, rss, series = result["pass_seconds"], result["rss_mib"], result["series"]

    def over_time(key: str) -> str:
        vals = series[key]
        return f"{vals[0]:g} → {vals[-1]:g} (max {max(vals):g})"

    requests = result["kube_requests_per_minute"]
    total = sum(requests.values())
    top = ", ".join(f"{k.replace('resource=', '').replace(',verb=', ' ')} {v:g}"
                    for k, v in sorted(requests.items(), key=lambda kv: -kv[1])[:6])  # fmt: skip
    api = result.get("apiserver_requests_per_minute", {})
    api_top = ", ".join(f"{k} {v:g}" for k, v in sorted(api.items(), key=lambda kv: -kv[1])[:6])
    mds, real, pods = result["modeldeployments"], result["real"], result["pods"]
    converged = f"{result['converged_seconds']} s"
    if not result.get("converged", True):
        converged += " (NOT all pods Ready)"
    writes = result["status_writes_per_minute"]
    skipped = result["status_writes_skipped_per_minute"]
    conflicts = list(result.get("status_write_conflicts_per_minute", {}).values())
    events = result.get("events_per_minute_by_reason", {})

    def flat(key: str) -> str:
        d = result.get("soak_drift", {}).get(key)
        if not d:
            return ""
        return (
            f"; first minute {d['first_minute']:g}, last {d['last_minute']:g}, "
            f"slope {d['slope_per_minute']:+g}/min"
        )

    rows = [
        ("ModelDeployments (real) / pods", f"{mds} ({real}) / {pods}"),
        ("converged (all pods Ready)", converged),
        ("soak", f"{result['soak_seconds']:.0f} s, {p['passes']} passes"),
        ("scaling pass p50 / p99 / max", f"{p['p50']} / {p['p99']} / {p['max']} s"),
        (
            "operator RSS first → last (peak)",
            f"{rss['first']} → {rss['last']} MiB (peak {rss['peak']}){flat('rss_mib')}",
        ),
        ("operator client requests/min", f"{total:.0f}: {top}"),
        ("apiserver requests/min, all clients", api_top or "—"),
        ("status writes/min (skipped/min)", f"{writes} ({skipped})"),
        ("status write conflicts/min (scaling, reconcile)", ", ".join(map(str, conflicts)) or "—"),
        ("events/min by reason", ", ".join(f"{k} {v:g}" for k, v in events.items()) or "none"),
        ("open TCP connections", over_time("connections") + flat("connections")),
        ("asyncio tasks", over_time("asyncio_tasks") + flat("asyncio_tasks")),
        ("threads", over_time("threads")),
        ("open fds", over_time("open_fds")),
    ]
    lines = ["| figure | value |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:2] == ["table"]:  # python bench/scale.py table [results.json]
        path = pathlib.Path(sys.argv[2]) if len(sys.argv) > 2 else RESULTS
        print(table(json.loads(path.read_text())))
        raise SystemExit(0)
    raise SystemExit(main())
