"""Run the real ``tritonserver`` shipped in the ``nvidia-pytriton`` wheel, bound to one IP.

``launch_spec`` turns a Triton container's args and env (as written in a pod spec) into the
argv and the complete environment of a local ``tritonserver`` process bound to ``address``.
The cluster harness runs it as ``ip netns exec <ns> <argv...>`` with that env; tests that only
need a bare server on loopback use ``start_local`` / ``wait_ready`` / ``stop``.

Facts this relies on (docs/field-notes.md, "Triton on CPU from nvidia-pytriton"):
- the Python backend needs a backend directory ``python/`` holding ``libtriton_python.so``,
  ``triton_python_backend_utils.py`` and the stub for *our* Python version;
- the stub takes its site-packages from the first ``python3`` on ``PATH`` (it ignores
  ``PYTHONPATH``), and needs the Python's own lib dir and ``nvidia_pytriton.libs`` on
  ``LD_LIBRARY_PATH``; the venv must be made from Debian's python3.11 (not pyenv's);
- a crashed stub leaves ``/dev/shm/<prefix>*`` regions behind; each server gets its own prefix
  (``--backend-config=python,shm-region-prefix-name=...``) so that we can clean up exactly its
  own regions.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib.util
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence

__all__ = [
    "DEFAULT_PORTS",
    "MODEL_REPOSITORY",
    "LocalTriton",
    "backend_directory",
    "cleanup_shm",
    "launch_spec",
    "shm_prefix",
    "start_local",
    "stop",
    "wait_ready",
]

#: The toy model repository shipped with the harness (e2e/models).
MODEL_REPOSITORY = pathlib.Path(__file__).resolve().parents[1] / "models"

DEFAULT_PORTS = {"http": 8000, "grpc": 8001, "metrics": 8002}

_SHM_DIR = pathlib.Path("/dev/shm")
_SHM_BASE = "triton_python_backend_shm_region_"

# Flags whose value we always decide ourselves; a container's own value is dropped.
_OWNED_FLAGS = {
    "--http-address",
    "--grpc-address",
    "--metrics-address",
    "--backend-directory",
}
# Environment that would make the stub load a foreign interpreter or site-packages.
_DROPPED_ENV = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "PYENV_VERSION")


def _site_packages() -> pathlib.Path:
    spec = importlib.util.find_spec("pytriton")
    if spec is None or spec.origin is None:
        raise RuntimeError("nvidia-pytriton is not installed in this Python (run `make venv`)")
    return pathlib.Path(spec.origin).resolve().parents[1]


def _triton_root() -> pathlib.Path:
    return _site_packages() / "pytriton" / "tritonserver"


def _venv() -> pathlib.Path:
    # <venv>/lib/python3.X/site-packages -> <venv>
    venv = _site_packages().parents[2]
    if not (venv / "bin" / "python3").exists():
        raise RuntimeError(f"pytriton is not installed in a venv ({venv}); run `make venv`")
    return venv


def _python_tag() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def tritonserver_binary() -> pathlib.Path:
    return _triton_root() / "bin" / "tritonserver"


def _cache_dir() -> pathlib.Path:
    base = os.environ.get("MODELSCALE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "modelscale"
    )
    return pathlib.Path(base)


def backend_directory(*, cache_dir: pathlib.Path | None = None) -> pathlib.Path:
    """Assemble (once) and return a Triton ``--backend-directory`` with the Python backend.

    Built in a shared cache keyed by the wheel's files, atomically (temp dir + rename), so that
    many servers started at once share one copy and a half-built directory is never used.
    """
    root = _triton_root()
    sources = {
        "libtriton_python.so": root / "backends" / "python" / "libtriton_python.so",
        "triton_python_backend_utils.py": root
        / "backends"
        / "python"
        / "triton_python_backend_utils.py",
        "triton_python_backend_stub": root
        / "python_backend_stubs"
        / _python_tag()
        / "triton_python_backend_stub",
    }
    for src in sources.values():
        if not src.is_file():
            raise RuntimeError(f"nvidia-pytriton wheel lacks {src}")
    stamp = "|".join(f"{s}:{s.stat().st_size}:{s.stat().st_mtime_ns}" for s in sources.values())
    key = hashlib.sha256(stamp.encode()).hexdigest()[:16]
    base = (cache_dir or _cache_dir()) / "triton-backends"
    final = base / f"py{_python_tag()}-{key}"
    if (final / "python" / "triton_python_backend_stub").is_file():
        return final
    base.mkdir(parents=True, exist_ok=True)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=".build-", dir=base))
    try:
        (tmp / "python").mkdir()
        for name, src in sources.items():
            shutil.copy2(src, tmp / "python" / name)
        try:
            tmp.rename(final)
        except OSError:
            # Another process won the race; its directory is complete (it was renamed whole).
            if not (final / "python" / "triton_python_backend_stub").is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def shm_prefix(address: str) -> str:
    """Shared-memory region prefix of the server bound to ``address`` (unique per address)."""
    return _SHM_BASE + address.replace(".", "_").replace(":", "_") + "_"


def cleanup_shm(address: str) -> list[str]:
    """Remove the ``/dev/shm`` regions left by the (stopped) server bound to ``address``."""
    removed = []
    for path in _SHM_DIR.glob(shm_prefix(address) + "*"):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            removed.append(path.name)
    return removed


def _parse_args(args: Sequence[str]) -> list[tuple[str, str | None]]:
    """Split Triton args into (flag, value) pairs; accepts ``--f=v`` and ``--f v``."""
    items = list(args)
    if items and not items[0].startswith("-") and os.path.basename(items[0]) == "tritonserver":
        items = items[1:]
    pairs: list[tuple[str, str | None]] = []
    i = 0
    while i < len(items):
        tok = items[i]
        if not tok.startswith("--"):
            raise ValueError(f"unexpected tritonserver argument {tok!r} in {list(args)!r}")
        if "=" in tok:
            flag, value = tok.split("=", 1)
            pairs.append((flag, value))
            i += 1
        elif i + 1 < len(items) and not items[i + 1].startswith("--"):
            pairs.append((tok, items[i + 1]))
            i += 2
        else:
            pairs.append((tok, None))
            i += 1
    return pairs


def _prepend(path_list: Sequence[str], existing: str | None) -> str:
    parts = [p for p in path_list if p]
    if existing:
        parts += [p for p in existing.split(os.pathsep) if p and p not in parts]
    return os.pathsep.join(parts)


def launch_spec(
    *,
    address: str,
    container_args: list[str],
    container_env: dict[str, str],
    workdir: pathlib.Path,
) -> tuple[list[str], dict[str, str]]:
    """Argv and complete environment of a ``tritonserver`` bound to ``address``.

    - HTTP, gRPC and metrics listen on ``address``; ports come from the container args
      (``--http-port`` / ``--grpc-port`` / ``--metrics-port``) or default to 8000/8001/8002.
    - Other args pass through unchanged (``--model-control-mode``, ``--metrics-config``, ...).
    - A ``--model-repository`` that is not a local directory (``s3://...``, ``/models``) is
      replaced by the toy model repository ``e2e/models``.
    - The environment is this process's, minus Python overrides, plus the container's env,
      plus what the Python backend stub needs (``PATH``, ``LD_LIBRARY_PATH``).

    ``workdir`` holds nothing the server needs today; it is created and used as the cwd-like
    home for files (logs) of the caller's choosing.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    ports = dict(DEFAULT_PORTS)
    passthrough: list[str] = []
    repos: list[str] = []
    has_shm_prefix = False
    for flag, value in _parse_args(container_args):
        if flag in _OWNED_FLAGS:
            continue
        if flag in ("--http-port", "--grpc-port", "--metrics-port") and value is not None:
            ports[flag[2:].split("-")[0]] = int(value)
            continue
        if flag in ("--model-repository", "--model-store"):
            if value is not None:
                repos.append(value)
            continue
        if flag == "--backend-config" and value and "shm-region-prefix-name" in value:
            has_shm_prefix = True
        passthrough.append(flag if value is None else f"{flag}={value}")

    local_repos = [r for r in repos if pathlib.Path(r).is_dir()]
    if not local_repos:
        local_repos = [str(MODEL_REPOSITORY)]

    argv = [str(tritonserver_binary())]
    argv += [f"--model-repository={r}" for r in local_repos]
    argv += [
        f"--backend-directory={backend_directory()}",
        f"--http-address={address}",
        f"--http-port={ports['http']}",
        f"--grpc-address={address}",
        f"--grpc-port={ports['grpc']}",
        f"--metrics-address={address}",
        f"--metrics-port={ports['metrics']}",
    ]
    if not has_shm_prefix:
        argv.append(f"--backend-config=python,shm-region-prefix-name={shm_prefix(address)}")
    argv += passthrough

    env = {k: v for k, v in os.environ.items() if k not in _DROPPED_ENV}
    env.update(container_env)
    venv = _venv()
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    env["PATH"] = _prepend([str(venv / "bin")], env.get("PATH") or os.defpath)
    env["LD_LIBRARY_PATH"] = _prepend(
        [libdir, str(_site_packages() / "nvidia_pytriton.libs")], env.get("LD_LIBRARY_PATH")
    )
    for key in _DROPPED_ENV:
        env.pop(key, None)
    return argv, env


# --- bare servers on loopback, for tests -------------------------------------------------


@dataclasses.dataclass
class LocalTriton:
    """A ``tritonserver`` started by ``start_local``."""

    process: subprocess.Popen[bytes]
    address: str
    ports: dict[str, int]
    log_path: pathlib.Path
    argv: list[str]

    @property
    def http_url(self) -> str:
        """``host:port`` of the HTTP endpoint, as tritonclient wants it."""
        return f"{self.address}:{self.ports['http']}"

    @property
    def grpc_url(self) -> str:
        return f"{self.address}:{self.ports['grpc']}"

    @property
    def metrics_url(self) -> str:
        return f"http://{self.address}:{self.ports['metrics']}/metrics"

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def start_local(
    *,
    address: str = "127.0.0.2",
    workdir: pathlib.Path,
    env: Mapping[str, str] | None = None,
    args: Sequence[str] = (),
) -> LocalTriton:
    """Start a bare ``tritonserver`` on ``address`` serving e2e/models; returns at once.

    ``env`` is the container env (e.g. ``TOY_LLM_*``); ``args`` extra Triton args.
    Call ``wait_ready`` next and ``stop`` at the end.
    """
    container_args = [
        f"--model-repository={MODEL_REPOSITORY}",
        "--metrics-config=summary_latencies=true",
        "--exit-timeout-secs=5",
        *args,
    ]
    argv, full_env = launch_spec(
        address=address,
        container_args=container_args,
        container_env=dict(env or {}),
        workdir=workdir,
    )
    ports = dict(DEFAULT_PORTS)
    for flag, value in _parse_args(argv[1:]):
        if flag in ("--http-port", "--grpc-port", "--metrics-port") and value is not None:
            ports[flag[2:].split("-")[0]] = int(value)
    log_path = workdir / f"tritonserver-{address}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            argv,
            env=full_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=workdir,
            start_new_session=True,
        )
    return LocalTriton(process=process, address=address, ports=ports, log_path=log_path, argv=argv)


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1.0) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def wait_ready(
    handle: LocalTriton, *, model: str | None = "toy_llm", timeout_s: float = 60.0
) -> float:
    """Block until the server (and ``model``, if given) is ready; return seconds waited.

    Raises ``RuntimeError`` with the server log's tail if the process exits or time runs out.
    """
    start = time.monotonic()
    base = f"http://{handle.http_url}/v2"
    url = f"{base}/models/{model}/ready" if model else f"{base}/health/ready"
    while True:
        if handle.process.poll() is not None:
            raise RuntimeError(
                f"tritonserver on {handle.address} exited with {handle.process.returncode}:\n"
                + handle.log_tail()
            )
        if _http_ok(url):
            return time.monotonic() - start
        if time.monotonic() - start > timeout_s:
            raise RuntimeError(
                f"tritonserver on {handle.address} not ready after {timeout_s:.0f}s "
                f"({url}):\n" + handle.log_tail()
            )
        time.sleep(0.1)


def stop(handle: LocalTriton, *, grace_s: float = 10.0) -> int:
    """SIGTERM, then SIGKILL after ``grace_s``; clean its shared memory; return the exit code."""
    proc = handle.process
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            # The server and its stubs share the session we gave it: kill them all.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    # Stubs outliving a killed server would hold the regions; they are in its session.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    cleanup_shm(handle.address)
    return proc.returncode
