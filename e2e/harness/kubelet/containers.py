"""One container of a pod: its process, restarts, probes and the status it reports."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
from typing import Any

from harness.kubelet.launch import PodSpecError
from harness.kubelet.probes import Prober


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


def kill_group(proc: subprocess.Popen[bytes], *, grace: float) -> None:
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
