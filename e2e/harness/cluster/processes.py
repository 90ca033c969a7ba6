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
from collections.abc import Callable

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


def kill_group(pid: int, *, grace: float) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if not alive(pid):
                return
            time.sleep(0.05)


def stop(name: str, *, grace: float = 10.0) -> None:
    pid = recorded_pid(name)
    if pid is not None:
        log(f"stopping {name} (pid {pid})")
        kill_group(pid, grace=grace)
    _pid_file(name).unlink(missing_ok=True)


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
