"""What process a container becomes: the images the runtime knows, their argv and env."""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
from typing import Any

from harness import topology as topo
from harness import triton

KNOWN_IMAGES = (
    "*tritonserver* (a real tritonserver from the nvidia-pytriton wheel, toy LLM model)",
    "*modelscale-operator* (this checkout's operator, authenticated as the pod's ServiceAccount)",
    "*busybox* / *pause* (sleep infinity)",
)


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


def base_env(pod: dict[str, Any]) -> dict[str, str]:
    return {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": os.environ.get("HOME", "/root"),
        "LANG": "C.UTF-8",
        "HOSTNAME": pod["metadata"]["name"],
    }


def triton_spec(
    *, address: str, container_args: list[str], container_env: dict[str, str], workdir: pathlib.Path
) -> tuple[list[str], dict[str, str]]:
    spec: tuple[list[str], dict[str, str]] = triton.launch_spec(
        address=address, container_args=container_args, container_env=container_env, workdir=workdir
    )
    return spec


def operator_launch(
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
