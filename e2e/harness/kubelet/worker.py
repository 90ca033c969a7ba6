"""One pod on a fake node: its IP, its processes, its probes, its status, its deletion."""

from __future__ import annotations

import contextlib
import logging
import pathlib
import shutil
import subprocess
import threading
import time
from typing import TYPE_CHECKING, Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from harness import topology as topo
from harness import triton
from harness.kubelet import keda, podenv
from harness.kubelet import status as pod_status
from harness.kubelet.common import POD_LOGS, PODS, now
from harness.kubelet.containers import Container, kill_group
from harness.kubelet.launch import (
    KNOWN_IMAGES,
    Launch,
    PodSpecError,
    expand,
    operator_launch,
    triton_spec,
)
from harness.kubelet.netns import pod_netns
from harness.kubelet.probes import Prober, run_probe

if TYPE_CHECKING:
    from harness.kubelet.runtime import Runtime

log = logging.getLogger("harness.kubelet")

BACKOFF_INITIAL = 1.0  # the kubelet starts at 10 s; tests want restarts they can wait for
BACKOFF_MAX = 30.0
KEDA_REFRESH = 2.0


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
        self.start_time = pod.get("status", {}).get("startTime") or now()
        self.containers = [Container(spec=c) for c in pod["spec"]["containers"]]
        self.wake = threading.Event()
        self.lock = threading.Lock()
        self.stopping = False
        self.gone = False  # the API object is gone (force delete)
        self.events_sent: set[str] = set()
        self.last_patch: tuple[str, float] = ("", 0.0)
        self.keda_refresh_at = 0.0
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
                self._refresh_keda(pod)
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

    def _refresh_keda(self, pod: dict[str, Any]) -> None:
        """KEDA containers: Secret volumes follow their Secret and /etc/hosts follows the
        Services' endpoints (every KEDA_REFRESH s, like the kubelet's volume sync)."""
        mono = time.monotonic()
        if mono < self.keda_refresh_at:
            return
        self.keda_refresh_at = mono + KEDA_REFRESH
        for c in self.containers:
            if c.running and keda.binary_for(str(c.spec.get("image", ""))) is not None:
                try:
                    keda.sync_volumes(self.rt.core, pod, c.spec, self.dir / c.name)
                    keda.write_hosts(self.rt.api, pod_netns(self.uid))
                except (PodSpecError, ApiException, OSError) as err:
                    log.warning("pod %s: KEDA volume/hosts refresh failed: %s", self.key, err)

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
        env = podenv.resolve_env(self.rt.core, pod, spec, pod_ip=self.ip or "")
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
            argv, full_env = triton_spec(
                address=self.ip or "",
                container_args=[*command[1:], *args],
                container_env=env,
                workdir=workdir,
            )
            return Launch(argv=list(argv), env=dict(full_env))
        if "modelscale-operator" in image:
            kubeconfig = podenv.write_pod_kubeconfig(self.rt.core, pod, workdir)
            return operator_launch(command=command, args=args, env=env, kubeconfig=kubeconfig)
        if "busybox" in image or "pause" in image:
            return Launch(argv=["sleep", "infinity"], env=env)
        if (binary := keda.binary_for(image)) is not None:
            mounts = keda.sync_volumes(self.rt.core, pod, spec, workdir)
            keda.write_hosts(self.rt.api, pod_netns(self.uid))
            kubeconfig = podenv.write_pod_kubeconfig(self.rt.core, pod, workdir)
            return keda.launch(
                binary=binary, args=[*command[1:], *args], env=env, mounts=mounts,
                kubeconfig=kubeconfig, namespace=self.ns,
            )  # fmt: skip
        raise PodSpecError(
            "ErrImagePull",
            f"image {image!r} is not known to the harness pod runtime; known: "
            + "; ".join([*KNOWN_IMAGES, keda.IMAGE_HELP]),
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
        out.write(f"--- {now()} start #{c.restart_count}: {' '.join(launch.argv)}\n".encode())
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
        c.started_at = now()
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
            "finishedAt": now(),
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
        kill_group(c.proc, grace=min(grace, 10.0))

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
    def desired_status(self, pod: dict[str, Any]) -> dict[str, Any]:
        return pod_status.desired(
            pod=pod,
            containers=self.containers,
            node=self.node,
            ip=self.ip,
            start_time=self.start_time,
        )

    def _report(self, pod: dict[str, Any]) -> None:
        status = self.desired_status(pod)
        observed = pod.get("status", {})
        # lastTransitionTime is fresh when the status flips; compare without it.
        cmp = {**status, "conditions": [
            {k: v for k, v in c.items() if k != "lastTransitionTime"} for c in status["conditions"]
        ]}  # fmt: skip
        if pod_status.contains(cmp, observed):
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
        kill_group(proc, grace=remaining)

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
        keda.remove_hosts(pod_netns(self.uid))
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
