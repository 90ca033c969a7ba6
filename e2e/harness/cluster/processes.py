"""The cluster's processes: start one in its own session and record it, find it again
(guarding against pid reuse), stop it, and wait for things to happen."""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import subprocess
import time
import urllib.error
from collections.abc import Callable, Iterable
from typing import NamedTuple

from harness import topology as topo
from harness.cluster.state import LOGS, PIDS, ClusterError, log

_PROCS: dict[str, subprocess.Popen[bytes]] = {}  # started by this process


def _pid_file(name: str) -> pathlib.Path:
    return PIDS / f"{name}.pid"


def _cmdline(pid: int) -> str:
    try:
        return pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def recorded_pid(name: str) -> int | None:
    """The pid recorded for a component if that process is still alive and still it."""
    try:
        pid_text, _, marker = _pid_file(name).read_text().partition(" ")
        pid = int(pid_text)
    except (OSError, ValueError):
        return None
    # Guard against pid reuse: the command line must still contain what we started.
    cmd = _cmdline(pid)
    if not cmd or marker.strip() not in cmd:
        return None
    return pid


def start(name: str, argv: list[str], *, env: dict[str, str] | None = None) -> int:
    LOGS.mkdir(parents=True, exist_ok=True)
    PIDS.mkdir(parents=True, exist_ok=True)
    log = (LOGS / f"{name}.log").open("ab")
    proc = subprocess.Popen(
        argv,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        cwd=topo.STATE,
        env=env,
        start_new_session=True,  # survives `make`; killed as a group by `down`
    )
    log.close()
    _PROCS[name] = proc
    marker = pathlib.Path(argv[0]).name if name != "kubelet" else "harness.kubelet"
    _pid_file(name).write_text(f"{proc.pid} {marker}\n")
    return proc.pid


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie child of this process (pytest started it) counts as dead.
    with contextlib.suppress(OSError):
        if pathlib.Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z"):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            return False
    return True


class _Stat(NamedTuple):
    state: str
    session: int


def _stat(pid: int) -> _Stat | None:
    try:
        text = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()  # the command name may hold spaces and ")"
    return _Stat(state=fields[0], session=int(fields[3]))


def exited(pid: int) -> bool:
    """Has the process exited completely? A multi-threaded process (etcd, the apiserver:
    Go) shows its main thread as a zombie while its other threads still tear it down,
    listening sockets included; `alive` calls that dead (`pgrep` saw the apiserver ~1 s
    after `down` returned), so here a zombie counts only once its last thread is gone."""
    st = _stat(pid)
    if st is None:
        return True
    if st.state not in ("Z", "X"):
        return False
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # our child (this process ran `up`): reap it
    try:
        return len(os.listdir(f"/proc/{pid}/task")) <= 1
    except OSError:
        return True


def session_members(sid: int) -> list[int]:
    """Processes of session `sid` that have not exited (`start` makes one per component)."""
    members = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            pid = int(entry.name)
            st = _stat(pid)
            if st is not None and st.session == sid and not exited(pid):
                members.append(pid)
    return members


KILL_WAIT = 10.0  # after SIGKILL: exiting frees a large heap, slow on a loaded machine


def kill_session(pid: int, *, grace: float) -> list[int]:
    """SIGTERM the process group `pid` leads, wait up to `grace` for every process of its
    session to exit, then SIGKILL what is left and wait again. Returns the pids still
    there after that (none, unless a process is stuck in the kernel)."""
    left: list[int] = []
    for sig, patience in ((signal.SIGTERM, grace), (signal.SIGKILL, KILL_WAIT)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)
        for member in {pid, *left}:
            with contextlib.suppress(ProcessLookupError):
                os.kill(member, sig)
        deadline = time.monotonic() + patience
        # Cheap while the leader runs; the whole session is scanned once it has exited.
        while left := [pid] if not exited(pid) else session_members(pid):
            if time.monotonic() >= deadline:
                break
            time.sleep(0.02)
        else:
            return []
    return left


def wait_exited(pids: Iterable[int], *, timeout: float) -> list[int]:
    """Wait until every one of `pids` has exited; returns those that did not in time."""
    deadline = time.monotonic() + timeout
    while left := [p for p in pids if not exited(p)]:
        if time.monotonic() >= deadline:
            return left
        time.sleep(0.02)
    return []


REAP_WAIT = 5.0


def wait_reaped(*, pids: Iterable[int], sessions: Iterable[int], timeout: float) -> list[int]:
    """Wait until `pids` and every process of `sessions` are gone from the process table.

    An exited process holds nothing, but it is listed (by `pgrep` too) until its parent
    reaps it. This process reaps its own children; processes an `up` in another process
    left behind belong to init, which on this machine reaps about once a second (measured:
    an orphan stayed a zombie 1.1 s). Returns the pids still listed after `timeout`."""
    want, sids = set(pids), set(sessions)
    deadline = time.monotonic() + timeout
    while True:
        left = []
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            pid = int(entry.name)
            st = _stat(pid)
            if st is not None and (pid in want or st.session in sids):
                exited(pid)  # reaps it when it is a child of this process
                if _stat(pid) is not None:
                    left.append(pid)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.05)


def wait_ports_free(ports: Iterable[int], *, timeout: float) -> list[int]:
    """Wait until nothing listens on any of `ports`; returns those still taken."""
    deadline = time.monotonic() + timeout
    while busy := [p for p in ports if port_open(p)]:
        if time.monotonic() >= deadline:
            return busy
        time.sleep(0.05)
    return []


def stop(name: str, *, grace: float = 10.0) -> list[int]:
    """Stop a component and wait for its whole session to exit; returns what survived."""
    pid = recorded_pid(name)
    left = []
    if pid is not None:
        log(f"stopping {name} (pid {pid})")
        left = kill_session(pid, grace=grace)
        if left:
            log(f"{name}: processes {left} still there after SIGKILL")
    _pid_file(name).unlink(missing_ok=True)
    return left


def run(
    argv: list[str], *, check: bool = True, quiet: bool = False
) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(argv, capture_output=True, text=True, check=False)
    if check and res.returncode != 0:
        raise ClusterError(f"{' '.join(argv)} failed ({res.returncode}): {res.stderr.strip()}")
    if not quiet and res.returncode != 0:
        log(f"ignored: {' '.join(argv)}: {res.stderr.strip()}")
    return res


def wait(what: str, check: Callable[[], bool], *, timeout: float, proc: str | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except (OSError, urllib.error.URLError, ValueError, KeyError):
            pass
        child = _PROCS.get(proc) if proc is not None else None
        if child is not None and child.poll() is not None:
            raise ClusterError(
                f"{proc} exited ({child.returncode}) while waiting for {what}; "
                f"see {LOGS / str(proc)}.log"
            )
        time.sleep(0.1)
    hint = f"; see {LOGS / proc}.log" if proc else ""
    raise ClusterError(f"timed out after {timeout:.0f} s waiting for {what}{hint}")


def port_open(port: int) -> bool:
    """Is anything listening on TCP `port`, on any address?"""
    out = subprocess.run(
        ["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True, check=False
    ).stdout
    return bool(out.strip())
