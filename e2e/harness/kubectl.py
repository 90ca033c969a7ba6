"""kubectl as a user types it, and polling with a message that says what never happened."""

from __future__ import annotations

import contextlib
import json
import pathlib
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import yaml


class Kubectl:
    """`kubectl` of the pinned build against the test cluster, as a user would type it."""

    def __init__(self, bin_dir: pathlib.Path, kubeconfig: pathlib.Path) -> None:
        self.bin = str(bin_dir / "kubectl")
        self.kubeconfig = str(kubeconfig)

    def run(
        self, *args: str, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [self.bin, "--kubeconfig", self.kubeconfig, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {proc.stderr}")
        return proc

    def apply(self, obj: dict[str, Any], *, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.run("apply", "-f", "-", stdin=yaml.safe_dump(obj), check=check)

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args, "-o", "json").stdout)

    @contextlib.contextmanager
    def namespace(self, prefix: str) -> Iterator[str]:
        """A new namespace `<prefix>-<random>`, deleted (without waiting) on exit."""
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        self.run("create", "namespace", name)
        try:
            yield name
        finally:
            self.run("delete", "namespace", name, "--wait=false", check=False)


def wait_until(
    check: Callable[[], Any], *, timeout: float, what: str, interval: float = 0.5
) -> Any:
    """Poll `check` until it returns something truthy; fail saying what never happened."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except Exception as err:  # keep polling; report the last error
            last = err
        else:
            if last:
                return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; last: {last!r}")
