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
import time
from typing import Any

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


def not_exited(pid: int) -> bool:
    """Still there in any form that holds resources: running, or a zombie main thread
    whose other threads are still tearing the process down."""
    try:
        state = pathlib.Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        threads = len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return False
    return state != "Z" or threads > 1


def listening(ports: tuple[int, ...]) -> list[str]:
    out = subprocess.run(["ss", "-ltnH"], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() for p in ports if f":{p} " in line]


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
    ports = (*harness_cluster.PORTS, topo.KUBELET_PORT)
    binaries = str(cluster.bin_dir).replace(".", r"\.")  # pgrep takes an extended regex

    with harness_cluster.locked():
        others = harness_cluster.other_users()
        if others:
            pytest.fail(
                f"pytest sessions {others} use the shared cluster and this test takes it down: "
                "run it alone (e2e/README.md: one session at a time)",
                pytrace=False,
            )
        started_by_pytest = harness_cluster.SESSION_STARTED.exists()
        pids = {
            name: int(harness_cluster.PIDS.joinpath(f"{name}.pid").read_text().split()[0])
            for name in harness_cluster.COMPONENTS
        }
        pids["pod process"] = pod_pid
        t0 = time.monotonic()
        harness_cluster.down()
        down_s = time.monotonic() - t0
        # Checked at once: nothing may still be on its way out.
        by_path = pgrep(
            f"^{binaries}/(etcd|kube-apiserver|kube-controller-manager|kube-scheduler) "
        )
        by_path += pgrep("-m harness.kubelet") + pgrep(f"prometheus --config.file={topo.STATE}")
        still = {name: pid for name, pid in pids.items() if not_exited(pid)}
        busy = listening(ports)
        t1 = time.monotonic()
        harness_cluster.up()  # would refuse a busy port
        up_s = time.monotonic() - t1
        # Leave the session as it found it: its registration, and who takes the cluster down.
        if started_by_pytest:
            harness_cluster.SESSION_STARTED.touch()
        harness_cluster.USERS.mkdir(parents=True, exist_ok=True)
        (harness_cluster.USERS / str(os.getpid())).touch()
    print(f"down {down_s:.2f} s, up right after {up_s:.1f} s")
    assert by_path == [], f"cluster processes alive right after down: {by_path}"
    assert still == {}, f"processes not yet exited right after down: {still}"
    assert busy == [], f"ports still listening right after down: {busy}"
    assert harness_cluster.running()
    nodes = core.list_node().items
    assert sorted(n.metadata.name for n in nodes) == sorted(n.name for n in topo.NODES)
