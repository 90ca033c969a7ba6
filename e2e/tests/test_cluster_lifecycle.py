"""`cluster down` returns only once the cluster is gone, so `up` can follow at once.

It takes the shared cluster down, so it runs first in its session (marker
`cluster_restart`) and only when no other pytest session uses the cluster (the sessions
register in `.cluster/users/`). A cluster that `make cluster-up` started is up again
afterwards, just fresh, as after any `cluster-down` / `cluster-up`.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import time
from typing import Any, NamedTuple

import pytest
from kubernetes import client

from harness import cluster as harness_cluster
from harness import topology as topo
from harness.pytest_plugin import WaitFor

pytestmark = [pytest.mark.cluster, pytest.mark.local_runtime, pytest.mark.cluster_restart]


def pgrep(pattern: str) -> list[str]:
    """`pgrep -af` lines for processes whose command line matches `pattern`."""
    res = subprocess.run(
        ["pgrep", "-af", "--", pattern], capture_output=True, text=True, check=False
    )
    return res.stdout.splitlines()


def in_process_table(pid: int) -> bool:
    """Listed at all, as `pgrep` lists it: running, exiting, or a zombie not yet reaped."""
    return pathlib.Path(f"/proc/{pid}").exists()


def listening(ports: tuple[int, ...]) -> list[str]:
    out = subprocess.run(["ss", "-ltnH"], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() for p in ports if f":{p} " in line]


class Remains(NamedTuple):
    """What is still there right after `down` returned (all empty when it is done)."""

    processes: list[str]  # pgrep on the binaries' paths, the pod runtime, Prometheus
    pids: dict[str, int]  # recorded pids still in the process table
    ports: list[str]  # fixed ports still listening


def recorded_pids() -> dict[str, int]:
    return {
        name: int(harness_cluster.PIDS.joinpath(f"{name}.pid").read_text().split()[0])
        for name in harness_cluster.COMPONENTS
    }


def down_and_look(pids: dict[str, int], *, bin_dir: pathlib.Path) -> tuple[float, Remains]:
    binaries = str(bin_dir).replace(".", r"\.")  # pgrep takes an extended regex
    t0 = time.monotonic()
    harness_cluster.down()
    took = time.monotonic() - t0
    # Looked at once: nothing may still be on its way out.
    found = pgrep(f"^{binaries}/(etcd|kube-apiserver|kube-controller-manager|kube-scheduler) ")
    found += pgrep("-m harness.kubelet") + pgrep(f"prometheus --config.file={topo.STATE}")
    return took, Remains(
        processes=found,
        pids={name: pid for name, pid in pids.items() if in_process_table(pid)},
        ports=listening((*harness_cluster.PORTS, topo.KUBELET_PORT)),
    )


def fail_if_shared() -> None:
    others = harness_cluster.other_users()
    if others:
        pytest.fail(
            f"pytest sessions {others} use the shared cluster and this test takes it down: "
            "run it alone (one session at a time)",
            pytrace=False,
        )


NOTHING = Remains(processes=[], pids={}, ports=[])


def test_down_returns_after_every_process_exited_and_up_works_at_once(
    cluster: harness_cluster.ClusterInfo, kube_api: Any, wait_for: WaitFor
) -> None:
    core = client.CoreV1Api(kube_api)
    # A pod process too, so that down also has the pod runtime's processes to stop.
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "lifecycle-sleeper"},
        "spec": {
            "containers": [{"name": "main", "image": "busybox:1.36"}],
            "terminationGracePeriodSeconds": 1,
        },
    }
    core.create_namespaced_pod("default", pod)
    running = wait_for(
        lambda: (
            (p := core.read_namespaced_pod("lifecycle-sleeper", "default")).status.phase
            == "Running"
            and p
        ),
        timeout=60,
        what="the sleeper pod Running",
    )
    pod_pid = int(running.status.container_statuses[0].container_id.removeprefix("harness://"))
    started_by_pytest = harness_cluster.SESSION_STARTED.exists()

    # 1. The cluster as this session found it (started by it, or by `make cluster-up`).
    with harness_cluster.locked():
        fail_if_shared()
        first_down, first = down_and_look(
            {**recorded_pids(), "pod process": pod_pid}, bin_dir=cluster.bin_dir
        )
    # 2. `make cluster-up` right after: it refuses a busy port. Its processes outlive it,
    # so init reaps them, which is the slow case for down.
    env = {**os.environ, "PYTHONPATH": str(topo.REPO / "e2e")}
    t0 = time.monotonic()
    cli_up = subprocess.run(
        [sys.executable, "-m", "harness.cluster", "up"],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    up_s = time.monotonic() - t0
    with harness_cluster.locked():
        fail_if_shared()
        second_down, second = down_and_look(recorded_pids(), bin_dir=cluster.bin_dir)
        harness_cluster.up()
        # Leave the session as it found it: its registration, and who takes the cluster down.
        if started_by_pytest:
            harness_cluster.SESSION_STARTED.touch()
        harness_cluster.USERS.mkdir(parents=True, exist_ok=True)
        (harness_cluster.USERS / str(os.getpid())).touch()

    print(f"down {first_down:.2f} s; cluster up right after {up_s:.1f} s; down {second_down:.2f} s")
    assert first == NOTHING, f"right after down: {first}"
    assert cli_up.returncode == 0, f"cluster up right after down failed: {cli_up.stderr}"
    assert second == NOTHING, f"right after down of a cluster `cluster up` started: {second}"
    assert harness_cluster.running()
    nodes = core.list_node().items
    assert sorted(n.metadata.name for n in nodes) == sorted(n.name for n in topo.NODES)
