"""Pod runtime for the fake GPU nodes: a kubelet stand-in that makes scheduled pods real.

One daemon (`python -m harness.kubelet`, started by `harness.cluster up`) serves all fake
nodes. It registers the nodes and keeps them Ready (Lease heartbeats plus periodic status
updates), watches the pods bound to them and, for each one, allocates an IP in its node's
range (a /32 on the node namespace's `lo`), starts a real process for the images it knows
inside that namespace, runs the pod's own startup/readiness/liveness probes, and reports
status the way the kubelet does (pkg/kubelet/status/generate.go). It patches only the
conditions it owns, with a strategic-merge patch that merges by `type`, so readiness-gate
conditions written by others (the operator's warm-up) are never clobbered.

Why not KWOK: its pod stages set every readiness gate True, which is exactly the
behaviour the operator's warm-up must not get for free.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import datetime as dt
import http.client
import json
import logging
import os
import pathlib
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from typing import Any

import yaml
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from harness import cluster, kubelet_server, triton
from harness import topology as topo

log = logging.getLogger("harness.kubelet")

PODS = topo.STATE / "pods"
POD_LOGS = topo.STATE / "logs" / "pods"
CERTS = topo.STATE / "certs"
POD_NETNS_PREFIX = topo.POD_NETNS_PREFIX
COMPONENT = "modelscale-harness-kubelet"
OWN_CONDITIONS = ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready")
KNOWN_IMAGES = (
    "*tritonserver* (a real tritonserver from the nvidia-pytriton wheel, toy LLM model)",
    "*modelscale-operator* (this checkout's operator, authenticated as the pod's ServiceAccount)",
    "*busybox* / *pause* (sleep infinity)",
)
NODE_STATUS_PERIOD = 20.0
LEASE_PERIOD = 5.0
BACKOFF_INITIAL = 1.0  # the kubelet starts at 10 s; tests want restarts they can wait for
BACKOFF_MAX = 30.0


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _micro_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# --------------------------------------------------------------------------- launch specs


@dataclasses.dataclass(frozen=True)
class Launch:
    argv: list[str]
    env: dict[str, str]


class PodSpecError(Exception):
    """The pod asks for something this runtime cannot run; the message says what."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


_VAR_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def expand(value: str, env: dict[str, str]) -> str:
    """Kubernetes $(VAR) expansion in env values, command and args ($$ escapes)."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        return env.get(name, m.group(0))

    return _VAR_REF.sub(sub, value)


def _base_env(pod: dict[str, Any]) -> dict[str, str]:
    return {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": os.environ.get("HOME", "/root"),
        "LANG": "C.UTF-8",
        "HOSTNAME": pod["metadata"]["name"],
    }


def _triton_spec(
    *, address: str, container_args: list[str], container_env: dict[str, str], workdir: pathlib.Path
) -> tuple[list[str], dict[str, str]]:
    spec: tuple[list[str], dict[str, str]] = triton.launch_spec(
        address=address, container_args=container_args, container_env=container_env, workdir=workdir
    )
    return spec


def _operator_launch(
    *, command: list[str], args: list[str], env: dict[str, str], kubeconfig: pathlib.Path
) -> Launch:
    venv_bin = topo.REPO / ".venv" / "bin"
    if not command or pathlib.Path(command[0]).name == "modelscale":
        argv = [str(venv_bin / "modelscale"), *command[1:], *args]
    elif pathlib.Path(command[0]).name.startswith("python"):
        argv = [str(venv_bin / "python"), *command[1:], *args]
    else:
        raise PodSpecError(
            "CommandNotSupported",
            f"operator image: command {command!r} is not `modelscale ...` or `python ...`",
        )
    full = dict(env)
    full["PATH"] = f"{venv_bin}:{full.get('PATH', '')}"
    full["KUBECONFIG"] = str(kubeconfig)
    full["PYTHONUNBUFFERED"] = "1"
    return Launch(argv=argv, env=full)


# --------------------------------------------------------------------------- probes


@dataclasses.dataclass
class Prober:
    kind: str  # startup | readiness | liveness
    spec: dict[str, Any]
    result: bool
    successes: int = 0
    failures: int = 0
    next_at: float = 0.0
    warned: bool = False

    @classmethod
    def make(cls, kind: str, spec: dict[str, Any], *, started_at: float) -> Prober:
        return cls(
            kind=kind,
            spec=spec,
            result=kind == "liveness",
            next_at=started_at + float(spec.get("initialDelaySeconds", 0)),
        )

    @property
    def period(self) -> float:
        return float(self.spec.get("periodSeconds", 10))

    def record(self, ok: bool) -> bool:
        """Apply one probe outcome with the thresholds; returns the (new) result."""
        if ok:
            self.successes += 1
            self.failures = 0
            threshold = int(self.spec.get("successThreshold", 1))
            if self.successes >= threshold:
                self.result = True
        else:
            self.failures += 1
            self.successes = 0
            if self.failures >= int(self.spec.get("failureThreshold", 3)):
                self.result = False
        return self.result


def run_probe(spec: dict[str, Any], *, pod_ip: str, ports: dict[str, int]) -> tuple[bool, str]:
    timeout = float(spec.get("timeoutSeconds", 1))

    def port_of(p: int | str) -> int:
        if isinstance(p, int) or str(p).isdigit():
            return int(p)
        if p not in ports:
            raise ValueError(f"named port {p!r} not in the container's ports")
        return ports[p]

    try:
        if "httpGet" in spec:
            h = spec["httpGet"]
            host = h.get("host") or pod_ip
            port = port_of(h.get("port", 80))
            conn: http.client.HTTPConnection
            if h.get("scheme", "HTTP").upper() == "HTTPS":
                ctx = ssl._create_unverified_context()  # the kubelet does not verify either
                conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=ctx)
            else:
                conn = http.client.HTTPConnection(host, port, timeout=timeout)
            try:
                headers = {x["name"]: x["value"] for x in h.get("httpHeaders") or []}
                conn.request("GET", h.get("path") or "/", headers=headers)
                status = conn.getresponse().status
            finally:
                conn.close()
            return 200 <= status < 400, f"HTTP probe failed with statuscode: {status}"
        if "tcpSocket" in spec:
            t = spec["tcpSocket"]
            with socket.create_connection(
                (t.get("host") or pod_ip, port_of(t["port"])), timeout=timeout
            ):
                return True, ""
        kind = next((k for k in ("exec", "grpc") if k in spec), "unknown")
        return False, f"{kind} probes are not supported by the harness pod runtime"
    except (OSError, ValueError, http.client.HTTPException) as err:
        return False, f"probe failed: {err}"


# --------------------------------------------------------------------------- containers


@dataclasses.dataclass
class Container:
    spec: dict[str, Any]
    proc: subprocess.Popen[bytes] | None = None
    started_at: str | None = None
    started_mono: float = 0.0
    restart_count: int = 0
    last_terminated: dict[str, Any] | None = None
    backoff_until: float = 0.0
    backoff: float = 0.0
    waiting: tuple[str, str] | None = ("ContainerCreating", "")
    probers: dict[str, Prober] = dataclasses.field(default_factory=dict)
    unsupported: PodSpecError | None = None
    done: bool = False  # exited and will not restart

    @property
    def name(self) -> str:
        return str(self.spec["name"])

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def started(self) -> bool:
        if not self.running:
            return False
        p = self.probers.get("startup")
        return p is None or p.result

    @property
    def ready(self) -> bool:
        if not self.started:
            return False
        p = self.probers.get("readiness")
        return p is None or p.result

    def ports(self) -> dict[str, int]:
        return {
            p["name"]: int(p["containerPort"])
            for p in self.spec.get("ports") or []
            if p.get("name")
        }

    def status(self) -> dict[str, Any]:
        state: dict[str, Any] = {"running": None, "waiting": None, "terminated": None}
        if self.running and self.proc is not None:
            state["running"] = {"startedAt": self.started_at}
        elif self.done and self.last_terminated is not None:
            state["terminated"] = self.last_terminated
        else:
            reason, message = self.waiting or ("ContainerCreating", "")
            state["waiting"] = {"reason": reason, "message": message or None}
        last: dict[str, Any] = {"running": None, "waiting": None, "terminated": None}
        if self.last_terminated is not None and not self.done:
            last["terminated"] = self.last_terminated
        return {
            "name": self.name,
            "image": self.spec.get("image", ""),
            "imageID": "",
            "containerID": f"harness://{self.proc.pid}" if self.proc is not None else None,
            "ready": self.ready,
            "started": self.started,
            "restartCount": self.restart_count,
            "state": state,
            "lastState": last,
        }


def _kill_group(proc: subprocess.Popen[bytes], *, grace: float) -> None:
    """SIGTERM the process group, wait up to `grace`, then SIGKILL (pod deletion)."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=max(grace, 0.0))
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    # Children that outlived the leader (Triton's Python stubs) go too.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


# --------------------------------------------------------------------------- IPs


def pod_netns(uid: str) -> str:
    return f"{POD_NETNS_PREFIX}{uid[:8]}"


def _ip_batch(netns: str, commands: list[str]) -> None:
    res = subprocess.run(
        ["ip", "-n", netns, "-batch", "-"],
        input="\n".join(commands) + "\n",
        capture_output=True,
        text=True,
        check=False,
    )
    if res.returncode != 0:
        raise OSError(f"ip -n {netns}: {res.stderr.strip()}")


class IPAM:
    """Pod IPs and pod network namespaces, like a point-to-point CNI plugin: every pod
    has its own namespace (so two pods on a node can both listen on 0.0.0.0:8080), with
    its IP as a /32 on `eth0`, a veth to its node's namespace and a /32 route there; the
    node namespace forwards and proxy-ARPs for its pods towards the host."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._used: dict[str, set[str]] = {n.name: set() for n in topo.NODES}

    def allocate(self, node: topo.FakeNode, *, uid: str, prefer: str | None = None) -> str:
        with self._lock:
            used = self._used[node.name]
            free = [ip for ip in node.pod_ips() if ip not in used]
            if not free:
                raise PodSpecError("IPExhausted", f"no free pod IP on {node.name}")
            ip = prefer if prefer in free else free[0]
            used.add(ip)
        ns, veth = pod_netns(uid), f"msp-{uid[:8]}"
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)
        subprocess.run(["ip", "netns", "add", ns], capture_output=True, check=True)
        _ip_batch(
            node.netns,
            [
                f"link add {veth} type veth peer name eth0 netns {ns}",
                f"link set {veth} up",
                f"route replace {ip}/32 dev {veth} scope link",
            ],
        )
        _ip_batch(
            ns,
            [
                "link set lo up",
                f"addr add {ip}/32 dev eth0",
                "link set eth0 up",
                f"route add {node.netns_ip} dev eth0 scope link",
                f"route add {topo.TEST_RANGE} via {node.netns_ip} dev eth0",
            ],
        )
        return ip

    def release(self, node: topo.FakeNode, ip: str, *, uid: str) -> None:
        # Deleting the namespace deletes the veth pair and with it the node's /32 route.
        subprocess.run(["ip", "netns", "del", pod_netns(uid)], capture_output=True, check=False)
        with self._lock:
            self._used[node.name].discard(ip)


# --------------------------------------------------------------------------- status helpers


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


# --------------------------------------------------------------------------- Prometheus SD


def _sd_name(key: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_]", "_", key)


def sd_targets(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Prometheus file_sd entries with the labels `kubernetes_sd_configs` (role pod) gives,
    so the standard relabelling applies (Debian's Prometheus lacks Kubernetes SD)."""
    out = []
    for pod in sorted(pods, key=lambda p: (p["metadata"]["namespace"], p["metadata"]["name"])):
        meta, status = pod["metadata"], pod.get("status") or {}
        ip = status.get("podIP")
        if not ip:
            continue
        ready = any(
            c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or []
        )
        labels = {
            "__meta_kubernetes_namespace": meta["namespace"],
            "__meta_kubernetes_pod_name": meta["name"],
            "__meta_kubernetes_pod_uid": meta["uid"],
            "__meta_kubernetes_pod_ip": ip,
            "__meta_kubernetes_pod_node_name": pod["spec"].get("nodeName", ""),
            "__meta_kubernetes_pod_host_ip": status.get("hostIP", ""),
            "__meta_kubernetes_pod_phase": status.get("phase", ""),
            "__meta_kubernetes_pod_ready": "true" if ready else "false",
        }
        for key, value in (meta.get("labels") or {}).items():
            labels[f"__meta_kubernetes_pod_label_{_sd_name(key)}"] = value
            labels[f"__meta_kubernetes_pod_labelpresent_{_sd_name(key)}"] = "true"
        for key, value in (meta.get("annotations") or {}).items():
            labels[f"__meta_kubernetes_pod_annotation_{_sd_name(key)}"] = value
            labels[f"__meta_kubernetes_pod_annotationpresent_{_sd_name(key)}"] = "true"
        out.append({"targets": [ip], "labels": labels})
    return out


# --------------------------------------------------------------------------- pod worker


class PodWorker:
    """Owns one pod: its IP, its processes, its probes, its status."""

    def __init__(self, rt: Runtime, pod: dict[str, Any]) -> None:
        self.rt = rt
        self.pod = pod
        self.uid: str = pod["metadata"]["uid"]
        self.ns: str = pod["metadata"]["namespace"]
        self.name: str = pod["metadata"]["name"]
        self.node = next(n for n in topo.NODES if n.name == pod["spec"]["nodeName"])
        self.key = f"{self.ns}/{self.name}"
        self.dir = PODS / f"{self.ns}_{self.name}_{self.uid[:8]}"
        self.ip: str | None = None
        self.start_time = pod.get("status", {}).get("startTime") or _now()
        self.containers = [Container(spec=c) for c in pod["spec"]["containers"]]
        self.wake = threading.Event()
        self.lock = threading.Lock()
        self.stopping = False
        self.gone = False  # the API object is gone (force delete)
        self.events_sent: set[str] = set()
        self.last_patch: tuple[str, float] = ("", 0.0)
        self.thread = threading.Thread(target=self._run, name=f"pod-{self.key}", daemon=True)

    # ---- inputs from the watch
    def update(self, pod: dict[str, Any]) -> None:
        with self.lock:
            self.pod = pod
        self.wake.set()

    def deleted(self) -> None:
        self.gone = True
        self.wake.set()

    # ---- main loop
    def _run(self) -> None:
        try:
            self._setup()
            while not self.rt.shutting_down.is_set():
                with self.lock:
                    pod = self.pod
                if self.gone or pod["metadata"].get("deletionTimestamp"):
                    self._terminate(pod)
                    return
                self._sync_containers(pod)
                self._report(pod)
                self.wake.wait(timeout=self._next_wait())
                self.wake.clear()
        except Exception:
            log.exception("pod worker %s crashed", self.key)
        finally:
            if self.rt.shutting_down.is_set():
                self._kill_all(grace=5.0)
                if self.ip and any(
                    "tritonserver" in str(c.spec.get("image")) for c in self.containers
                ):
                    triton.cleanup_shm(self.ip)
            self.rt.forget(self.uid)

    def _setup(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        POD_LOGS.mkdir(parents=True, exist_ok=True)
        prev = self.pod.get("status", {}).get("podIP")
        if not self.pod["metadata"].get("deletionTimestamp"):
            self.ip = self.rt.ipam.allocate(self.node, uid=self.uid, prefer=prev)
        if self.pod["spec"].get("initContainers"):
            self._event(
                "Warning",
                "InitContainersNotSupported",
                "the harness pod runtime does not run init containers; the pod stays Pending",
            )
        log.info("pod %s on %s gets IP %s", self.key, self.node.name, self.ip)

    def _next_wait(self) -> float:
        now = time.monotonic()
        due = [p.next_at for c in self.containers if c.running for p in c.probers.values()]
        due += [c.backoff_until for c in self.containers if not c.running and c.backoff_until > now]
        nxt = min(due, default=now + 0.5)
        return max(0.02, min(0.25, nxt - now))

    # ---- containers
    def _launch(self, pod: dict[str, Any], c: Container) -> Launch:
        spec = c.spec
        image = str(spec.get("image", ""))
        env = self.rt.resolve_env(pod, spec, pod_ip=self.ip or "")
        command = [expand(x, env) for x in spec.get("command") or []]
        args = [expand(x, env) for x in spec.get("args") or []]
        workdir = self.dir / c.name
        workdir.mkdir(parents=True, exist_ok=True)
        if "tritonserver" in image:
            if command and "tritonserver" not in pathlib.Path(command[0]).name:
                raise PodSpecError(
                    "CommandNotSupported",
                    f"triton image: command {command!r} does not start tritonserver",
                )
            argv, full_env = _triton_spec(
                address=self.ip or "",
                container_args=[*command[1:], *args],
                container_env=env,
                workdir=workdir,
            )
            return Launch(argv=list(argv), env=dict(full_env))
        if "modelscale-operator" in image:
            kubeconfig = self.rt.write_pod_kubeconfig(pod, workdir)
            return _operator_launch(command=command, args=args, env=env, kubeconfig=kubeconfig)
        if "busybox" in image or "pause" in image:
            return Launch(argv=["sleep", "infinity"], env=env)
        raise PodSpecError(
            "ErrImagePull",
            f"image {image!r} is not known to the harness pod runtime; known: "
            + "; ".join(KNOWN_IMAGES),
        )

    def _start(self, pod: dict[str, Any], c: Container) -> None:
        if pod["spec"].get("initContainers"):
            c.waiting = ("PodInitializing", "init containers are not supported by the harness")
            return
        try:
            try:
                launch = self._launch(pod, c)
            except (ValueError, OSError) as err:  # e.g. args tritonserver cannot take
                raise PodSpecError("CreateContainerError", f"{c.name}: {err}") from err
        except PodSpecError as err:
            c.waiting = (err.reason, err.message)
            if err.reason == "CreateContainerConfigError":  # may resolve: retry like the kubelet
                c.backoff_until = time.monotonic() + 2.0
                self._event("Warning", "Failed", err.message)
                return
            c.unsupported = err
            self._event(
                "Warning",
                "ImageNotKnown" if err.reason == "ErrImagePull" else err.reason,
                err.message,
            )
            return
        argv = ["ip", "netns", "exec", pod_netns(self.uid), *launch.argv]
        out = (POD_LOGS / f"{self.ns}_{self.name}_{c.name}.log").open("ab")
        out.write(f"--- {_now()} start #{c.restart_count}: {' '.join(launch.argv)}\n".encode())
        out.flush()
        c.proc = subprocess.Popen(
            argv,
            env=launch.env,
            cwd=self.dir / c.name,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        out.close()
        (self.dir / f"{c.name}.pid").write_text(f"{c.proc.pid}\n")
        c.started_at = _now()
        c.started_mono = time.monotonic()
        c.waiting = None
        c.probers = {
            kind: Prober.make(kind, spec, started_at=c.started_mono)
            for kind in ("startup", "readiness", "liveness")
            if (spec := c.spec.get(f"{kind}Probe"))
        }
        self._event("Normal", "Started", f"Started container {c.name} (pid {c.proc.pid})")
        log.info("pod %s container %s started pid %d", self.key, c.name, c.proc.pid)

    def _exited(self, pod: dict[str, Any], c: Container) -> None:
        assert c.proc is not None
        code = c.proc.returncode
        if code < 0:
            code = 128 - code  # killed by a signal, the way container runtimes report it
        c.last_terminated = {
            "exitCode": code,
            "reason": "Completed" if code == 0 else "Error",
            "startedAt": c.started_at,
            "finishedAt": _now(),
            "containerID": f"harness://{c.proc.pid}",
        }
        policy = pod["spec"].get("restartPolicy", "Always")
        if policy == "Never" or (policy == "OnFailure" and code == 0):
            c.done = True
            return
        c.backoff = BACKOFF_INITIAL if c.backoff == 0 else min(c.backoff * 2, BACKOFF_MAX)
        if time.monotonic() - c.started_mono > 600:
            c.backoff = BACKOFF_INITIAL  # the kubelet resets back-off after 10 min of running
        c.backoff_until = time.monotonic() + c.backoff
        c.waiting = (
            "CrashLoopBackOff",
            f"back-off {c.backoff:.0f}s restarting failed container={c.name} pod={self.name}",
        )
        c.restart_count += 1
        c.proc = None
        if "tritonserver" in str(c.spec.get("image")) and self.ip:
            triton.cleanup_shm(self.ip)
        self._event("Warning", "BackOff", f"container {c.name} exited with {code}; restarting")

    def _restart(self, c: Container, why: str) -> None:
        """Probe-triggered restart: kill now; the exit path does the bookkeeping."""
        assert c.proc is not None
        self._event("Normal", "Killing", f"Container {c.name} {why}, will be restarted")
        grace = float(self.pod["spec"].get("terminationGracePeriodSeconds", 30))
        _kill_group(c.proc, grace=min(grace, 10.0))

    def _sync_containers(self, pod: dict[str, Any]) -> None:
        now = time.monotonic()
        for c in self.containers:
            if c.unsupported is not None or c.done:
                continue
            if c.proc is not None and c.proc.poll() is not None:
                self._exited(pod, c)
            if c.proc is None:
                if now >= c.backoff_until:
                    self._start(pod, c)
                continue
            self._probe(c, now)

    def _probe(self, c: Container, now: float) -> None:
        ports = c.ports()
        order = ["startup"] if "startup" in c.probers and not c.probers["startup"].result else []
        order = order or [k for k in ("readiness", "liveness") if k in c.probers]
        for kind in order:
            p = c.probers[kind]
            if now < p.next_at:
                continue
            ok, msg = run_probe(p.spec, pod_ip=self.ip or "", ports=ports)
            p.next_at = now + p.period
            if "not supported" in msg and not p.warned:
                p.warned = True
                self._event("Warning", "ProbeNotSupported", f"{kind} probe of {c.name}: {msg}")
            before = p.result
            after = p.record(ok)
            if not ok:
                log.debug("pod %s %s probe of %s failed: %s", self.key, kind, c.name, msg)
                if kind == "readiness" and "not supported" not in msg:
                    self._event("Warning", "Unhealthy", f"Readiness probe failed: {msg}")
            if before != after:
                log.info("pod %s container %s %s probe -> %s", self.key, c.name, kind, after)
            if (
                not after
                and kind in ("startup", "liveness")
                and p.failures >= int(p.spec.get("failureThreshold", 3))
            ):
                self._event("Warning", "Unhealthy", f"{kind.capitalize()} probe failed: {msg}")
                self._restart(c, f"failed {kind} probe")
                return

    # ---- status
    def _phase(self) -> str:
        if any(c.unsupported or (c.proc is None and c.restart_count == 0) for c in self.containers):
            return "Pending"
        if all(c.done for c in self.containers):
            ok = all((c.last_terminated or {}).get("exitCode") == 0 for c in self.containers)
            return "Succeeded" if ok else "Failed"
        return "Running"

    def desired_status(self, pod: dict[str, Any]) -> dict[str, Any]:
        statuses = [c.status() for c in self.containers]
        phase = self._phase()
        cr, ready = ready_conditions(pod=pod, containers=statuses, phase=phase)
        initialized = not pod["spec"].get("initContainers")
        own = {
            "PodReadyToStartContainers": {"status": "True" if self.ip else "False"},
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
                    "lastTransitionTime": old["lastTransitionTime"] if same and old else _now(),
                }
            )
        status: dict[str, Any] = {
            "phase": phase,
            "hostIP": self.node.internal_ip,
            "hostIPs": [{"ip": self.node.internal_ip}],
            "startTime": self.start_time,
            "conditions": conditions,
            "containerStatuses": statuses,
        }
        if self.ip:
            status["podIP"] = self.ip
            status["podIPs"] = [{"ip": self.ip}]
        return status

    def _report(self, pod: dict[str, Any]) -> None:
        status = self.desired_status(pod)
        observed = pod.get("status", {})
        # lastTransitionTime is fresh when the status flips; compare without it.
        cmp = {**status, "conditions": [
            {k: v for k, v in c.items() if k != "lastTransitionTime"} for c in status["conditions"]
        ]}  # fmt: skip
        if contains(cmp, observed):
            return
        sig = repr(cmp)
        if sig == self.last_patch[0] and time.monotonic() - self.last_patch[1] < 2.0:
            return  # sent already; the watch has not caught up yet
        try:
            self.rt.core.patch_namespaced_pod_status(self.name, self.ns, {"status": status})
            self.last_patch = (sig, time.monotonic())
        except ApiException as err:
            if err.status == 404:
                self.gone = True
            else:
                log.warning("status patch of %s failed: %s", self.key, err.reason)

    # ---- deletion
    def _kill_all(self, *, grace: float, pre_stop: bool = False) -> None:
        threads = [
            threading.Thread(
                target=self._stop_container,
                args=(c,),
                kwargs={"grace": grace, "pre_stop": pre_stop},
            )
            for c in self.containers
            if c.proc is not None
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def _stop_container(self, c: Container, *, grace: float, pre_stop: bool) -> None:
        """The kubelet's order: the preStop hook, then SIGTERM, SIGKILL when the grace
        period (which the hook's time counts against, minimum 2 s left) runs out."""
        proc = c.proc
        if proc is None:
            return
        start = time.monotonic()
        hook = ((c.spec.get("lifecycle") or {}).get("preStop") or {}) if pre_stop else {}
        if hook and proc.poll() is None:
            self._pre_stop(c, hook, budget=grace)
        remaining = max(grace - (time.monotonic() - start), 2.0 if hook else 0.0)
        _kill_group(proc, grace=remaining)

    def _pre_stop(self, c: Container, hook: dict[str, Any], *, budget: float) -> None:
        if "sleep" in hook:
            time.sleep(min(float(hook["sleep"].get("seconds", 0)), budget))
        elif "httpGet" in hook:
            ok, msg = run_probe(
                {**hook, "timeoutSeconds": budget}, pod_ip=self.ip or "", ports=c.ports()
            )
            if not ok:
                self._event("Warning", "FailedPreStopHook", f"{c.name}: {msg}")
        else:
            self._event(
                "Warning",
                "FailedPreStopHook",
                f"{c.name}: only sleep and httpGet preStop hooks are supported by the harness",
            )

    def _terminate(self, pod: dict[str, Any]) -> None:
        grace = pod["metadata"].get("deletionGracePeriodSeconds")
        if grace is None:
            grace = pod["spec"].get("terminationGracePeriodSeconds", 30)
        if self.gone:
            grace = min(float(grace), 2.0)
        log.info("pod %s terminating (grace %s s)", self.key, grace)
        if any(c.running for c in self.containers):
            self._event("Normal", "Killing", "Stopping container(s)")
        self._kill_all(grace=float(grace), pre_stop=not self.gone)
        for c in self.containers:
            (self.dir / f"{c.name}.pid").unlink(missing_ok=True)
        if self.ip and any("tritonserver" in str(c.spec.get("image")) for c in self.containers):
            triton.cleanup_shm(self.ip)  # a killed Python-backend stub leaves /dev/shm regions
        if self.ip:
            self.rt.ipam.release(self.node, self.ip, uid=self.uid)
            self.ip = None
        shutil.rmtree(self.dir, ignore_errors=True)
        if not self.gone:
            # The kubelet's final delete: grace 0 removes the object, uid guards a new pod
            # that reuses the name.
            with contextlib.suppress(ApiException):
                self.rt.core.delete_namespaced_pod(
                    self.name,
                    self.ns,
                    body=client.V1DeleteOptions(
                        grace_period_seconds=0, preconditions=client.V1Preconditions(uid=self.uid)
                    ),
                )
        log.info("pod %s gone", self.key)

    def _event(self, etype: str, reason: str, message: str) -> None:
        key = f"{reason}:{message}"
        if key in self.events_sent:
            return
        self.events_sent.add(key)
        self.rt.emit_event(self.pod, etype=etype, reason=reason, message=message, node=self.node)


# --------------------------------------------------------------------------- runtime


class Runtime:
    def __init__(self) -> None:
        # The client's partial typing wants model objects; this code sends plain dicts
        # (what the API takes) and reads raw JSON, so the clients are Any here.
        load: Any = config.load_kube_config
        load(config_file=str(CERTS / "kubelet.kubeconfig"))
        self.api: Any = client.ApiClient()
        self.core: Any = client.CoreV1Api(self.api)
        self.coord: Any = client.CoordinationV1Api(self.api)
        self.ipam = IPAM()
        self.workers: dict[str, PodWorker] = {}
        self.workers_lock = threading.Lock()
        self.shutting_down = threading.Event()
        self.node_names = {n.name for n in topo.NODES}
        self.sd_pods: dict[str, dict[str, Any]] = {}
        self.sd_dirty = threading.Event()

    # ---- nodes
    def node_body(self, node: topo.FakeNode) -> dict[str, Any]:
        resources = {
            "cpu": "16",
            "memory": "64Gi",
            "pods": "110",
            "ephemeral-storage": "100Gi",
            "nvidia.com/gpu": str(topo.GPUS_PER_NODE),
        }
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": node.name,
                "labels": {
                    "kubernetes.io/hostname": node.name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "topology.kubernetes.io/zone": node.zone,
                    "nvidia.com/gpu.product": topo.GPU_PRODUCT,
                    "nvidia.com/gpu.count": str(topo.GPUS_PER_NODE),
                    "modelscale.dev/fake-node": "true",
                },
            },
            "spec": {"podCIDR": node.pod_cidr, "podCIDRs": [node.pod_cidr]},
            "status": {
                "capacity": resources,
                "allocatable": resources,
                "addresses": [
                    {"type": "InternalIP", "address": node.internal_ip},
                    {"type": "Hostname", "address": node.name},
                ],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "nodeInfo": {
                    "machineID": f"modelscale-{node.name}",
                    "systemUUID": f"modelscale-{node.name}",
                    "bootID": f"modelscale-{node.name}",
                    "kernelVersion": os.uname().release,
                    "osImage": "modelscale local harness",
                    "containerRuntimeVersion": "harness://0.1.0",
                    "kubeletVersion": topo.K8S_VERSION,
                    "kubeProxyVersion": "",
                    "operatingSystem": "linux",
                    "architecture": "amd64",
                },
                "conditions": self.node_conditions(),
            },
        }

    @staticmethod
    def node_conditions() -> list[dict[str, Any]]:
        now = _now()

        def cond(ctype: str, status: str, reason: str, message: str) -> dict[str, Any]:
            return {
                "type": ctype,
                "status": status,
                "reason": reason,
                "message": message,
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }

        return [
            cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "enough memory"),
            cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "no disk pressure"),
            cond("PIDPressure", "False", "KubeletHasSufficientPID", "enough PIDs"),
            cond("Ready", "True", "KubeletReady", "harness pod runtime is posting ready status"),
        ]

    def register_nodes(self) -> None:
        for node in topo.NODES:
            body = self.node_body(node)
            try:
                self.core.create_node(body)
                log.info("registered node %s", node.name)
            except ApiException as err:
                if err.status != 409:
                    raise
                self.core.patch_node(
                    node.name, {"metadata": body["metadata"], "spec": body["spec"]}
                )
            self.core.patch_node_status(node.name, {"status": body["status"]})

    def heartbeat(self) -> None:
        """Leases every LEASE_PERIOD s, node status every NODE_STATUS_PERIOD s."""
        last_status = time.monotonic()
        while not self.shutting_down.wait(LEASE_PERIOD):
            try:
                for node in topo.NODES:
                    self.renew_lease(node)
                if time.monotonic() - last_status >= NODE_STATUS_PERIOD:
                    last_status = time.monotonic()
                    for node in topo.NODES:
                        self.patch_node_heartbeat(node)
            except Exception as err:
                log.warning("heartbeat failed: %s", err)

    def patch_node_heartbeat(self, node: topo.FakeNode) -> None:
        current = self.core.read_node_status(node.name)
        conds = self.api.sanitize_for_serialization(current.status.conditions or [])
        want = {c["type"]: c for c in self.node_conditions()}
        for c in conds:
            c["lastHeartbeatTime"] = _now()
            if c["type"] in want and c["status"] != want[c["type"]]["status"]:
                c.update(want[c["type"]])
        if {c["type"] for c in conds} != set(want):
            conds = list(want.values())
        self.core.patch_node_status(node.name, {"status": {"conditions": conds}})

    def renew_lease(self, node: topo.FakeNode) -> None:
        body: dict[str, Any] = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": node.name, "namespace": "kube-node-lease"},
            "spec": {
                "holderIdentity": node.name,
                "leaseDurationSeconds": 40,
                "renewTime": _micro_now(),
            },
        }
        try:
            self.coord.patch_namespaced_lease(node.name, "kube-node-lease", {"spec": body["spec"]})
        except ApiException as err:
            if err.status != 404:
                raise
            uid = self.core.read_node(node.name).metadata.uid
            body["metadata"]["ownerReferences"] = [
                {"apiVersion": "v1", "kind": "Node", "name": node.name, "uid": uid}
            ]
            self.coord.create_namespaced_lease("kube-node-lease", body)

    # ---- env, tokens, events
    def resolve_env(
        self, pod: dict[str, Any], spec: dict[str, Any], *, pod_ip: str
    ) -> dict[str, str]:
        env = _base_env(pod)
        ns = pod["metadata"]["namespace"]
        for src in spec.get("envFrom") or []:
            prefix = src.get("prefix", "")
            data: dict[str, str] = {}
            if "configMapRef" in src:
                ref = src["configMapRef"]
                data = self._configmap(ns, ref["name"], optional=ref.get("optional", False))
            elif "secretRef" in src:
                ref = src["secretRef"]
                data = self._secret(ns, ref["name"], optional=ref.get("optional", False))
            env.update({prefix + k: v for k, v in data.items()})
        for e in spec.get("env") or []:
            name = e["name"]
            if "value" in e:
                env[name] = expand(str(e["value"]), env)
                continue
            vf = e.get("valueFrom") or {}
            if "fieldRef" in vf:
                env[name] = self._field(pod, vf["fieldRef"]["fieldPath"], pod_ip=pod_ip)
            elif "configMapKeyRef" in vf:
                ref = vf["configMapKeyRef"]
                data = self._configmap(ns, ref["name"], optional=ref.get("optional", False))
                if ref["key"] in data:
                    env[name] = data[ref["key"]]
            elif "secretKeyRef" in vf:
                ref = vf["secretKeyRef"]
                data = self._secret(ns, ref["name"], optional=ref.get("optional", False))
                if ref["key"] in data:
                    env[name] = data[ref["key"]]
            elif "resourceFieldRef" in vf:
                res = vf["resourceFieldRef"]["resource"]
                kind, _, rname = res.partition(".")
                value = ((spec.get("resources") or {}).get(kind) or {}).get(rname)
                env[name] = str(value) if value is not None else "0"
            else:
                env[name] = ""
        return env

    def _field(self, pod: dict[str, Any], path: str, *, pod_ip: str) -> str:
        meta = pod["metadata"]
        m = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
        if m:
            return str((meta.get(m.group(1)) or {}).get(m.group(2), ""))
        node = next(n for n in topo.NODES if n.name == pod["spec"]["nodeName"])
        values = {
            "metadata.name": meta["name"],
            "metadata.namespace": meta["namespace"],
            "metadata.uid": meta["uid"],
            "spec.nodeName": pod["spec"]["nodeName"],
            "spec.serviceAccountName": pod["spec"].get("serviceAccountName", "default"),
            "status.podIP": pod_ip,
            "status.podIPs": pod_ip,
            "status.hostIP": node.internal_ip,
            "status.hostIPs": node.internal_ip,
        }
        return str(values.get(path, ""))

    def _configmap(self, ns: str, name: str, *, optional: bool) -> dict[str, str]:
        try:
            return dict(self.core.read_namespaced_config_map(name, ns).data or {})
        except ApiException as err:
            if optional and err.status == 404:
                return {}
            raise PodSpecError(
                "CreateContainerConfigError", f"configmap {name!r}: {err.reason}"
            ) from err

    def _secret(self, ns: str, name: str, *, optional: bool) -> dict[str, str]:
        try:
            data = self.core.read_namespaced_secret(name, ns).data or {}
        except ApiException as err:
            if optional and err.status == 404:
                return {}
            raise PodSpecError(
                "CreateContainerConfigError", f"secret {name!r}: {err.reason}"
            ) from err
        return {k: base64.b64decode(v).decode() for k, v in data.items()}

    def write_pod_kubeconfig(self, pod: dict[str, Any], workdir: pathlib.Path) -> pathlib.Path:
        """A kubeconfig with a TokenRequest token bound to the pod, for its ServiceAccount:
        the process gets exactly the RBAC a real pod would."""
        meta = pod["metadata"]
        sa = pod["spec"].get("serviceAccountName") or "default"
        req = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "expirationSeconds": 86400,
                "boundObjectRef": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": meta["name"],
                    "uid": meta["uid"],
                },
            },
        }
        try:
            resp = self.core.create_namespaced_service_account_token(sa, meta["namespace"], req)
        except ApiException as err:
            raise PodSpecError(
                "CreateContainerConfigError",
                f"TokenRequest for serviceaccount {sa!r}: {err.reason}",
            ) from err
        user = f"system:serviceaccount:{meta['namespace']}:{sa}"
        cfg = cluster.kubeconfig_dict(
            server=topo.apiserver_url(from_pod=True), user=user, token=resp.status.token
        )
        path = workdir / "kubeconfig"
        path.write_text(yaml.safe_dump(cfg))
        path.chmod(0o600)
        return path

    def emit_event(
        self, pod: dict[str, Any], *, etype: str, reason: str, message: str, node: topo.FakeNode
    ) -> None:
        meta = pod["metadata"]
        now = _now()
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta["uid"],
            },
            "reason": reason,
            "message": message[:1000],
            "type": etype,
            "source": {"component": COMPONENT, "host": node.name},
            "reportingComponent": COMPONENT,
            "reportingInstance": node.name,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            self.core.create_namespaced_event(meta["namespace"], body)
        except ApiException as err:
            # 403 is normal while the namespace terminates (no new objects in it).
            (log.debug if err.status == 403 else log.warning)(
                "event %s for %s/%s not sent: %s",
                reason,
                meta["namespace"],
                meta["name"],
                err.reason,
            )

    # ---- pods
    def pod_alive(self, ns: str, name: str) -> bool:
        with self.workers_lock:
            return any(w.key == f"{ns}/{name}" and not w.gone for w in self.workers.values())

    def forget(self, uid: str) -> None:
        with self.workers_lock:
            self.workers.pop(uid, None)

    def dispatch(self, etype: str, pod: dict[str, Any]) -> None:
        if pod.get("spec", {}).get("nodeName") not in self.node_names:
            return
        uid = pod["metadata"]["uid"]
        if etype == "DELETED":
            self.sd_pods.pop(uid, None)
        else:
            self.sd_pods[uid] = pod
        self.sd_dirty.set()
        with self.workers_lock:
            worker = self.workers.get(uid)
            if etype == "DELETED":
                if worker is not None:
                    worker.deleted()
                return
            if worker is not None:
                worker.update(pod)
                return
            phase = pod.get("status", {}).get("phase")
            if phase in ("Succeeded", "Failed") and not pod["metadata"].get("deletionTimestamp"):
                return
            worker = PodWorker(self, pod)
            self.workers[uid] = worker
        worker.thread.start()

    def watch_pods(self) -> None:
        """List then watch pods bound to any node; relist on every error (resync)."""
        while not self.shutting_down.is_set():
            try:
                resp = self.core.list_pod_for_all_namespaces(
                    field_selector="spec.nodeName!=", _preload_content=False
                )
                listing = json.loads(resp.data)
                seen = set()
                for pod in listing["items"]:
                    seen.add(pod["metadata"]["uid"])
                    self.dispatch("MODIFIED", pod)
                with self.workers_lock:
                    vanished = [wk for uid, wk in self.workers.items() if uid not in seen]
                for gone in vanished:
                    gone.deleted()
                for uid in set(self.sd_pods) - seen:
                    self.sd_pods.pop(uid, None)
                rv = listing["metadata"]["resourceVersion"]
                stream: Any = watch.Watch()  # type: ignore[no-untyped-call]
                for ev in stream.stream(
                    self.core.list_pod_for_all_namespaces,
                    field_selector="spec.nodeName!=",
                    resource_version=rv,
                    timeout_seconds=300,
                    allow_watch_bookmarks=True,
                ):
                    if self.shutting_down.is_set():
                        stream.stop()
                        break
                    if ev["type"] in ("ADDED", "MODIFIED", "DELETED"):
                        self.dispatch(ev["type"], ev["raw_object"])
            except Exception as err:
                if self.shutting_down.is_set():
                    break
                log.warning("pod watch interrupted (%s); relisting", err)
                time.sleep(0.5)

    def write_sd(self) -> None:
        """Rewrite the file_sd file when pods change (atomic rename: Prometheus watches it)."""
        path = cluster.SD_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        last = ""
        while not self.shutting_down.is_set():
            if not self.sd_dirty.wait(timeout=1.0):
                continue
            self.sd_dirty.clear()
            text = json.dumps(sd_targets(list(self.sd_pods.values())), indent=1)
            if text != last:
                tmp = path.with_suffix(".tmp")
                tmp.write_text(text)
                tmp.replace(path)
                last = text
            time.sleep(0.1)  # batch bursts of pod updates

    def cleanup_leftovers(self) -> None:
        """Processes of a previous runtime instance (crash) are killed; pods restart."""
        for pid_file in PODS.glob("*/*.pid") if PODS.exists() else []:
            with contextlib.suppress(ValueError, OSError):
                pid = int(pid_file.read_text().split()[0])
                os.killpg(pid, signal.SIGKILL)
        shutil.rmtree(PODS, ignore_errors=True)
        cluster.delete_pod_namespaces()

    def run(self) -> None:
        self.cleanup_leftovers()
        for attempt in range(60):
            try:
                self.register_nodes()
                break
            except Exception as err:
                if attempt == 59:
                    raise
                log.warning("node registration failed (%s); retrying", err)
                time.sleep(1)
        for node in topo.NODES:
            self.renew_lease(node)
        kubelet_server.serve(
            addresses=[n.internal_ip for n in topo.NODES],
            port=topo.KUBELET_PORT,
            cert=CERTS / "kubelet-serving.crt",
            key=CERTS / "kubelet-serving.key",
            client_ca=CERTS / "ca.crt",
            log_path=lambda ns, pod, container: POD_LOGS / f"{ns}_{pod}_{container}.log",
            alive=self.pod_alive,
        )
        threading.Thread(target=self.heartbeat, name="heartbeat", daemon=True).start()
        threading.Thread(target=self.watch_pods, name="watch", daemon=True).start()
        threading.Thread(target=self.write_sd, name="prometheus-sd", daemon=True).start()
        self.shutting_down.wait()
        # Stop every pod process before exiting (cluster-down).
        with self.workers_lock:
            workers = list(self.workers.values())
        for w in workers:
            w.wake.set()
        for w in workers:
            w.thread.join(timeout=10)
        for w in workers:
            w._kill_all(grace=0)


def main(argv: list[str] | None = None) -> int:
    del argv
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(threadName)s %(message)s"
    )
    logging.getLogger("kubernetes").setLevel(logging.WARNING)
    rt = Runtime()

    def stop(signum: int, frame: Any) -> None:
        del signum, frame
        log.info("stopping: terminating all pod processes")
        rt.shutting_down.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    rt.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
