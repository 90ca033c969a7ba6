"""Pod IPs and pod network namespaces (what a point-to-point CNI plugin would do)."""

from __future__ import annotations

import subprocess
import threading

from harness import topology as topo
from harness.kubelet.launch import PodSpecError


def pod_netns(uid: str) -> str:
    return f"{topo.POD_NETNS_PREFIX}{uid[:8]}"


def ip_batch(netns: str, commands: list[str]) -> None:
    res = subprocess.run(
        ["ip", "-n", netns, "-batch", "-"],
        input="\n".join(commands) + "\n",
        capture_output=True,
        text=True,
        check=False,
    )
    if res.returncode != 0:
        raise OSError(f"ip -n {netns}: {res.stderr.strip()}")


class IPAM:
    """Pod IPs and pod network namespaces, like a point-to-point CNI plugin: every pod
    has its own namespace (so two pods on a node can both listen on 0.0.0.0:8080), with
    its IP as a /32 on `eth0`, a veth to its node's namespace and a /32 route there; the
    node namespace forwards and proxy-ARPs for its pods towards the host."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._used: dict[str, set[str]] = {n.name: set() for n in topo.NODES}

    def allocate(self, node: topo.FakeNode, *, uid: str, prefer: str | None = None) -> str:
        with self._lock:
            used = self._used[node.name]
            free = [ip for ip in node.pod_ips() if ip not in used]
            if not free:
                raise PodSpecError("IPExhausted", f"no free pod IP on {node.name}")
            ip = prefer if prefer in free else free[0]
            used.add(ip)
        ns, veth = pod_netns(uid), f"msp-{uid[:8]}"
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)
        subprocess.run(["ip", "netns", "add", ns], capture_output=True, check=True)
        ip_batch(
            node.netns,
            [
                f"link add {veth} type veth peer name eth0 netns {ns}",
                f"link set {veth} up",
                f"route replace {ip}/32 dev {veth} scope link",
            ],
        )
        ip_batch(
            ns,
            [
                "link set lo up",
                f"addr add {ip}/32 dev eth0",
                "link set eth0 up",
                f"route add {node.netns_ip} dev eth0 scope link",
                f"route add {topo.TEST_RANGE} via {node.netns_ip} dev eth0",
            ],
        )
        return ip

    def release(self, node: topo.FakeNode, ip: str, *, uid: str) -> None:
        # Deleting the namespace deletes the veth pair and with it the node's /32 route.
        subprocess.run(["ip", "netns", "del", pod_netns(uid)], capture_output=True, check=False)
        with self._lock:
            self._used[node.name].discard(ip)
