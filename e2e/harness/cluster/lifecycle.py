"""up, down and shared sessions: bring the cluster up, take it down leaving nothing
behind, and let several pytest sessions share one cluster."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import pathlib
import shutil
import time
import urllib.error
from collections.abc import Iterator

from harness import topology as topo
from harness.cluster import certs, components, network, prometheus, state
from harness.cluster.processes import (
    KILL_WAIT,
    REAP_WAIT,
    alive,
    kill_session,
    port_open,
    recorded_pid,
    stop,
    wait,
    wait_ports_free,
    wait_reaped,
)
from harness.cluster.state import ClusterError, ClusterInfo, info, log


def running() -> bool:
    """True when every component recorded in .cluster/pids is alive and the API answers."""
    if any(recorded_pid(c) is None for c in state.COMPONENTS):
        return False
    try:
        return bool(components.api_get("/readyz", timeout=2) == "ok")
    except (OSError, urllib.error.URLError):
        return False


def check_root() -> None:
    if os.geteuid() != 0:
        raise ClusterError(
            "the local cluster needs root (network namespaces for pod IPs); "
            "without root use the kind path: see e2e/kind/README.md (make e2e-kind)"
        )


def check_ports() -> None:
    busy = [p for p in state.PORTS if port_open(p)]
    if busy:
        raise ClusterError(f"ports {busy} are in use by another process (see `ss -ltnp`)")


def up() -> ClusterInfo:
    """Bring the cluster up, or report the one already running (no-op)."""
    check_root()
    if running():
        log("cluster already running")
        return info()
    if any(recorded_pid(c) is not None for c in state.COMPONENTS):
        log("a partial cluster is running: stopping it first")
    down(quiet=True)
    components.ensure_binaries()
    prometheus.ensure_prometheus()
    check_ports()
    topo.STATE.mkdir(parents=True, exist_ok=True)
    if state.LOGS.exists():  # keep the previous run's logs for post-mortems
        prev = topo.STATE / "logs.prev"
        shutil.rmtree(prev, ignore_errors=True)
        state.LOGS.rename(prev)
    started = time.monotonic()
    try:
        _start_all()
    except BaseException:
        down(quiet=True)  # no half cluster left behind; logs stay for the post-mortem
        raise
    state.FINGERPRINT.write_text(fingerprint() + "\n")
    state.ENV_FILE.write_text(
        f"KUBECONFIG={topo.kubeconfig_path()}\nPROMETHEUS_URL={topo.prometheus_url()}\n"
    )
    log(f"cluster up in {time.monotonic() - started:.1f} s")
    return info()


def _start_all() -> None:
    certs.ensure_certs()
    certs.write_kubeconfigs()
    network.setup_network()
    components.start_etcd()
    wait("etcd", lambda: port_open(topo.ETCD_CLIENT_PORT), timeout=30, proc="etcd")
    components.start_apiserver()
    wait("kube-apiserver /readyz", lambda: components.api_get("/readyz", timeout=2) == "ok",
         timeout=90, proc="kube-apiserver")  # fmt: skip
    components.start_controller_manager()
    components.start_scheduler()
    components.start_kubelet()
    prometheus.start_prometheus()
    wait("3 fake nodes Ready", components.nodes_ready, timeout=60, proc="kubelet")
    wait("the default ServiceAccount (controller-manager working)", components.default_sa,
         timeout=60, proc="kube-controller-manager")  # fmt: skip


def down(*, quiet: bool = False) -> None:
    """Stop everything `up` started and delete the namespaces, veths and routes. Returns
    once every process it stopped has exited and is reaped, and the fixed ports are free,
    so an `up` right after cannot meet a busy port (what is still there is logged, and
    `leftovers` reports it)."""
    sessions = [pid for c in state.COMPONENTS if (pid := recorded_pid(c)) is not None]
    pods = _pod_processes()
    left: list[int] = []
    for name in state.COMPONENTS:
        left += stop(name, grace=15.0 if name == "kubelet" else 10.0)
    # Safety net for pod processes the runtime could not stop (it records their pids).
    for pid in pods:
        left += kill_session(pid, grace=2.0)
    killed = network.teardown_network()
    left = wait_reaped(pids=[*left, *killed], sessions=[*sessions, *pods], timeout=REAP_WAIT)
    busy = wait_ports_free((*state.PORTS, topo.KUBELET_PORT), timeout=KILL_WAIT)
    data = (state.ETCD_DATA, state.PROM_DATA, state.PODS, state.PIDS, state.USERS)
    for d in (*data, prometheus.SD_FILE.parent):
        shutil.rmtree(d, ignore_errors=True)
    state.ENV_FILE.unlink(missing_ok=True)
    state.SESSION_STARTED.unlink(missing_ok=True)
    if left or busy:
        log(f"down: still there: processes {left}, ports {busy}")
    if not quiet:
        log("cluster down")


def _pod_processes() -> list[int]:
    """Pod processes recorded by the pod runtime (`pods/<ns>_<pod>_<uid8>/<container>.pid`)
    that are still alive in their pod's network namespace; the namespace check keeps a
    pid reused by an unrelated process out of reach."""
    found = []
    for pid_file in state.PODS.glob("*/*.pid") if state.PODS.exists() else []:
        netns = topo.POD_NETNS_PREFIX + pid_file.parent.name.rpartition("_")[2]
        with contextlib.suppress(ValueError, OSError):
            pid = int(pid_file.read_text().split()[0])
            if os.stat(f"/proc/{pid}/ns/net").st_ino == os.stat(f"/run/netns/{netns}").st_ino:
                found.append(pid)
    return found


def leftovers() -> list[str]:
    """What `down` should have removed but did not (empty when clean)."""
    found = [f"netns {n.netns}" for n in topo.NODES if network.netns_exists(n.netns)]
    found += [f"netns {ns}" for ns in network.pod_namespaces()]
    found += [f"link {n.host_veth}" for n in topo.NODES if network.link_exists(n.host_veth)]
    if network.link_exists(topo.HOST_IFACE):
        found.append(f"link {topo.HOST_IFACE}")
    for port in (*state.PORTS, topo.KUBELET_PORT):
        if port_open(port):
            found.append(f"port {port}")
    found += [f"process {c}" for c in state.COMPONENTS if recorded_pid(c) is not None]
    return found


HARNESS = pathlib.Path(__file__).resolve().parents[1]  # the harness package


def fingerprint() -> str:
    """Hash of the harness code a running cluster was started with: every .py file of the
    harness package, sorted by path (the path is hashed too, so moving code counts)."""
    h = hashlib.sha256()
    for path in sorted(HARNESS.rglob("*.py")):
        h.update(path.relative_to(HARNESS).as_posix().encode() + b"\0")
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def running_fingerprint() -> str:
    try:
        return state.FINGERPRINT.read_text().strip()
    except OSError:
        return ""


@contextlib.contextmanager
def locked() -> Iterator[None]:
    """Serialise up/down between concurrent callers (several pytest sessions share it)."""
    # Machine-wide (netns names and ports are), and outside .cluster/ so that removing
    # the state directory cannot split the lock.
    state.LOCK.parent.mkdir(parents=True, exist_ok=True)
    with state.LOCK.open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def other_users() -> list[int]:
    users = []
    for f in state.USERS.glob("*") if state.USERS.exists() else []:
        pid = int(f.name) if f.name.isdigit() else -1
        if pid != os.getpid() and pid > 0 and alive(pid):
            users.append(pid)
        elif pid != os.getpid():
            f.unlink(missing_ok=True)
    return users


@contextlib.contextmanager
def session() -> Iterator[ClusterInfo]:
    """Reuse a running cluster, or bring one up. A cluster started by a pytest session is
    taken down by the last live session using it (sessions register in .cluster/users/);
    one started by `make cluster-up` stays up."""
    check_root()
    with locked():
        if running() and fingerprint() != running_fingerprint() and not other_users():
            # Engineers edit the harness while clusters run: test the code in the checkout.
            log("the running cluster was started by other harness code: restarting it")
            down(quiet=True)
        if not running():
            up()
            state.SESSION_STARTED.touch()  # the last session out takes it down
        ci = info()
        state.USERS.mkdir(parents=True, exist_ok=True)
        (state.USERS / str(os.getpid())).touch()
    try:
        yield ci
    finally:
        with locked():
            (state.USERS / str(os.getpid())).unlink(missing_ok=True)
            if state.SESSION_STARTED.exists() and not other_users():
                down()
