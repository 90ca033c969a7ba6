"""Host interface, node and pod network namespaces, veths and the test range's route."""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import signal

from harness import topology as topo
from harness.cluster.processes import KILL_WAIT, run, wait_exited


def netns_exists(name: str) -> bool:
    return pathlib.Path(f"/run/netns/{name}").exists()


def link_exists(name: str) -> bool:
    return pathlib.Path(f"/sys/class/net/{name}").exists()


def setup_network() -> None:
    """Host interface for the apiserver's advertise address and one namespace per
    node, joined to the host by a veth; the host routes the whole test range to nowhere
    else (an `unreachable` route), so no 198.18 packet can leave the machine."""
    teardown_network()
    # This kernel has no `dummy` driver: a veth pair with both ends on the host serves.
    peer = f"{topo.HOST_IFACE}p"
    run(["ip", "link", "add", topo.HOST_IFACE, "type", "veth", "peer", "name", peer])
    run(["ip", "addr", "add", f"{topo.HOST_ADDRESS}/32", "dev", topo.HOST_IFACE])
    run(["ip", "link", "set", topo.HOST_IFACE, "up"])
    run(["ip", "link", "set", peer, "up"])
    run(["ip", "route", "add", "unreachable", str(topo.TEST_RANGE)])
    for node in topo.NODES:
        ns, veth = node.netns, node.host_veth
        run(["ip", "netns", "add", ns])
        run(["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns])
        run(["ip", "addr", "add", f"{node.gateway}/24", "dev", veth])
        run(["ip", "link", "set", veth, "up"])
        run(["ip", "-n", ns, "link", "set", "lo", "up"])
        run(["ip", "-n", ns, "addr", "add", f"{node.netns_ip}/24", "dev", "eth0"])
        run(["ip", "-n", ns, "link", "set", "eth0", "up"])
        run(["ip", "-n", ns, "route", "add", str(topo.TEST_RANGE), "via", node.gateway])
        # The node namespace routes between the host and its pods' namespaces (each pod
        # has its own, see harness.kubelet.netns.IPAM) and answers ARP for them on eth0.
        # Namespace-local sysctls: the host's settings are untouched.
        run(["ip", "netns", "exec", ns, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1",
              "net.ipv4.conf.eth0.proxy_arp=1"])  # fmt: skip
        # Forward only between our veths (pod to pod across nodes, pod to apiserver);
        # the per-interface switch leaves the host's global ip_forward untouched.
        pathlib.Path(f"/proc/sys/net/ipv4/conf/{veth}/forwarding").write_text("1\n")


def pod_namespaces() -> list[str]:
    netns_dir = pathlib.Path("/run/netns")
    if not netns_dir.exists():
        return []
    return sorted(p.name for p in netns_dir.iterdir() if p.name.startswith(topo.POD_NETNS_PREFIX))


def _kill_in(ns: str) -> list[int]:
    """SIGKILL every process in network namespace `ns`; returns their pids."""
    pids = [
        int(p) for p in run(["ip", "netns", "pids", ns], check=False, quiet=True).stdout.split()
    ]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return pids


def delete_pod_namespaces() -> list[int]:
    """Kill what still runs in pod namespaces, wait for it to exit and delete them
    (teardown, runtime restart). Returns the pids it killed."""
    killed = []
    for ns in pod_namespaces():
        killed += _kill_in(ns)
        run(["ip", "netns", "del", ns], check=False, quiet=True)
    # Per-pod /etc/hosts the pod runtime writes for KEDA pods (harness.kubelet.keda).
    for etc in pathlib.Path("/etc/netns").glob(f"{topo.POD_NETNS_PREFIX}*"):
        shutil.rmtree(etc, ignore_errors=True)
    wait_exited(killed, timeout=KILL_WAIT)
    return killed


def teardown_network() -> list[int]:
    """Delete what `setup_network` made, and every pod namespace; processes still in any
    of the namespaces are killed, and waited for. Returns the pids it killed."""
    killed = delete_pod_namespaces()
    for node in topo.NODES:
        if netns_exists(node.netns):
            killed += _kill_in(node.netns)
            run(["ip", "netns", "del", node.netns], check=False)
        if link_exists(node.host_veth):
            run(["ip", "link", "del", node.host_veth], check=False, quiet=True)
    if link_exists(topo.HOST_IFACE):
        run(["ip", "link", "del", topo.HOST_IFACE], check=False)
    routes = run(["ip", "route", "show", "type", "unreachable"], check=False, quiet=True).stdout
    if str(topo.TEST_RANGE) in routes:
        run(["ip", "route", "del", "unreachable", str(topo.TEST_RANGE)], check=False)
    wait_exited(killed, timeout=KILL_WAIT)
    return killed
