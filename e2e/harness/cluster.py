"""Local Kubernetes cluster without Docker: etcd, control plane, fake GPU nodes, Prometheus.

`python -m harness.cluster up|down|status|env` (PYTHONPATH=e2e); `make cluster-up` calls it.
Every process started here runs in its own session, is recorded in `.cluster/pids/` and is
stopped by `down`, which also deletes the network namespaces, veths, the host
interface and the route it made. Needs root (network namespaces); elsewhere use e2e/kind.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import pathlib
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import yaml

from harness import topology as topo

CERTS = topo.STATE / "certs"
PIDS = topo.STATE / "pids"
LOGS = topo.STATE / "logs"
ETCD_DATA = topo.STATE / "etcd"
PROM_DATA = topo.STATE / "prometheus"
PODS = topo.STATE / "pods"
ENV_FILE = topo.STATE / "env"
LOCK = pathlib.Path("/run/lock/modelscale-cluster.lock")
FINGERPRINT = topo.STATE / "harness-version"
SESSION_STARTED = topo.STATE / "started-by-pytest"  # absent when `make cluster-up` did it
USERS = topo.STATE / "users"  # one file per pytest session using the cluster (its pid)
PORTS = (topo.ETCD_CLIENT_PORT, topo.ETCD_PEER_PORT, topo.APISERVER_PORT, topo.PROMETHEUS_PORT)

# Stop order: the pod runtime first (it stops pod processes while the apiserver still
# answers), etcd last.
COMPONENTS = (
    "kubelet",
    "prometheus",
    "kube-scheduler",
    "kube-controller-manager",
    "kube-apiserver",
    "etcd",
)


class ClusterError(RuntimeError):
    """The cluster cannot be started; the message says what to do."""


@dataclasses.dataclass(frozen=True)
class ClusterInfo:
    kubeconfig: pathlib.Path
    prometheus_url: str
    apiserver_url: str
    state_dir: pathlib.Path
    bin_dir: pathlib.Path


def info() -> ClusterInfo:
    return ClusterInfo(
        kubeconfig=topo.kubeconfig_path(),
        prometheus_url=topo.prometheus_url(),
        apiserver_url=topo.apiserver_url(),
        state_dir=topo.STATE,
        bin_dir=topo.bin_dir(),
    )


# --------------------------------------------------------------------------- processes


def _log(msg: str) -> None:
    print(f"[cluster] {msg}", file=sys.stderr, flush=True)


_PROCS: dict[str, subprocess.Popen[bytes]] = {}  # started by this process


def _pid_file(name: str) -> pathlib.Path:
    return PIDS / f"{name}.pid"


def _cmdline(pid: int) -> str:
    try:
        return pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _recorded_pid(name: str) -> int | None:
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


def _start(name: str, argv: list[str], *, env: dict[str, str] | None = None) -> int:
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


def _alive(pid: int) -> bool:
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


def _kill_group(pid: int, *, grace: float) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if not _alive(pid):
                return
            time.sleep(0.05)


def _stop(name: str, *, grace: float = 10.0) -> None:
    pid = _recorded_pid(name)
    if pid is not None:
        _log(f"stopping {name} (pid {pid})")
        _kill_group(pid, grace=grace)
    _pid_file(name).unlink(missing_ok=True)


# --------------------------------------------------------------------------- certificates


def _run(
    argv: list[str], *, check: bool = True, quiet: bool = False
) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(argv, capture_output=True, text=True, check=False)
    if check and res.returncode != 0:
        raise ClusterError(f"{' '.join(argv)} failed ({res.returncode}): {res.stderr.strip()}")
    if not quiet and res.returncode != 0:
        _log(f"ignored: {' '.join(argv)}: {res.stderr.strip()}")
    return res


def _openssl_leaf(name: str, *, subject: str, usage: str, sans: str = "") -> None:
    """EC P-256 leaf certificate signed by the cluster CA (openssl CLI: the venv has no
    `cryptography`, and openssl 3 does this in two commands)."""
    key, csr, crt = CERTS / f"{name}.key", CERTS / f"{name}.csr", CERTS / f"{name}.crt"
    ext = CERTS / f"{name}.ext"
    lines = ["basicConstraints=CA:FALSE", "keyUsage=critical,digitalSignature,keyEncipherment"]
    lines.append(f"extendedKeyUsage={usage}")
    if sans:
        lines.append(f"subjectAltName={sans}")
    ext.write_text("\n".join(lines) + "\n")
    _run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
          "-out", str(key)])  # fmt: skip
    _run(["openssl", "req", "-new", "-key", str(key), "-subj", subject, "-out", str(csr)])
    _run(["openssl", "x509", "-req", "-in", str(csr), "-CA", str(CERTS / "ca.crt"),
          "-CAkey", str(CERTS / "ca.key"), "-CAcreateserial", "-days", "3650",
          "-extfile", str(ext), "-out", str(crt)])  # fmt: skip
    csr.unlink()
    ext.unlink()


CLIENTS = {
    # name: subject (O = group, CN = user); RBAC bootstrap roles exist for the system users.
    "admin": "/O=system:masters/CN=kubernetes-admin",
    "kube-controller-manager": "/CN=system:kube-controller-manager",
    "kube-scheduler": "/CN=system:kube-scheduler",
    "kubelet": "/O=system:masters/CN=modelscale-harness-kubelet",
}


CERTS_VERSION = "2"  # bump when the set of certificates changes


def ensure_certs() -> None:
    done = CERTS / "done"
    if done.exists() and done.read_text().strip() == CERTS_VERSION:
        return
    shutil.rmtree(CERTS, ignore_errors=True)
    CERTS.mkdir(parents=True)
    _log("generating certificates")
    _run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
          "-out", str(CERTS / "ca.key")])  # fmt: skip
    _run(["openssl", "req", "-x509", "-new", "-key", str(CERTS / "ca.key"), "-days", "3650",
          "-subj", "/CN=modelscale-local-ca", "-out", str(CERTS / "ca.crt"),
          "-addext", "basicConstraints=critical,CA:TRUE",
          "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature"])  # fmt: skip
    sans = ",".join(
        [
            "IP:127.0.0.1",
            f"IP:{topo.HOST_ADDRESS}",
            f"IP:{topo.SERVICE_IP}",
            "DNS:localhost",
            "DNS:kubernetes",
            "DNS:kubernetes.default",
            "DNS:kubernetes.default.svc",
            "DNS:kubernetes.default.svc.cluster.local",
        ]
    )
    _openssl_leaf("apiserver", subject="/CN=kube-apiserver", usage="serverAuth", sans=sans)
    for name, subject in CLIENTS.items():
        _openssl_leaf(name, subject=subject, usage="clientAuth")
    # The pod runtime's kubelet API (logs) and the apiserver's client cert for it.
    node_ips = ",".join(f"IP:{n.internal_ip}" for n in topo.NODES)
    _openssl_leaf(
        "kubelet-serving", subject="/CN=harness-kubelet", usage="serverAuth", sans=node_ips
    )
    _openssl_leaf(
        "apiserver-kubelet-client",
        subject="/O=system:masters/CN=kube-apiserver-kubelet-client",
        usage="clientAuth",
    )
    # Service-account token signing key (RSA: what every client library verifies).
    _run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048",
          "-out", str(CERTS / "sa.key")])  # fmt: skip
    _run(["openssl", "pkey", "-in", str(CERTS / "sa.key"), "-pubout",
          "-out", str(CERTS / "sa.pub")])  # fmt: skip
    for p in CERTS.glob("*.key"):
        p.chmod(0o600)
    done.write_text(CERTS_VERSION + "\n")


def _b64(path: pathlib.Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def kubeconfig_dict(*, server: str, user: str, token: str | None = None) -> dict[str, Any]:
    """A kubeconfig with everything embedded (Prometheus and helm read it as is)."""
    creds: dict[str, str]
    if token is not None:
        creds = {"token": token}
    else:
        creds = {
            "client-certificate-data": _b64(CERTS / f"{user}.crt"),
            "client-key-data": _b64(CERTS / f"{user}.key"),
        }
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "modelscale-local",
                "cluster": {"server": server, "certificate-authority-data": _b64(CERTS / "ca.crt")},
            }
        ],
        "users": [{"name": user, "user": creds}],
        "contexts": [
            {"name": "modelscale-local", "context": {"cluster": "modelscale-local", "user": user}}
        ],
        "current-context": "modelscale-local",
    }


def _write_kubeconfigs() -> None:
    for user in CLIENTS:
        path = CERTS / f"{user}.kubeconfig"
        path.write_text(yaml.safe_dump(kubeconfig_dict(server=topo.apiserver_url(), user=user)))
        path.chmod(0o600)
    shutil.copy(CERTS / "admin.kubeconfig", topo.kubeconfig_path())


# --------------------------------------------------------------------------- network


def _netns_exists(name: str) -> bool:
    return pathlib.Path(f"/run/netns/{name}").exists()


def _link_exists(name: str) -> bool:
    return pathlib.Path(f"/sys/class/net/{name}").exists()


def setup_network() -> None:
    """Host interface for the apiserver's advertise address and one namespace per
    node, joined to the host by a veth; the host routes the whole test range to nowhere
    else (an `unreachable` route), so no 198.18 packet can leave the machine."""
    teardown_network()
    # This kernel has no `dummy` driver: a veth pair with both ends on the host serves.
    peer = f"{topo.HOST_IFACE}p"
    _run(["ip", "link", "add", topo.HOST_IFACE, "type", "veth", "peer", "name", peer])
    _run(["ip", "addr", "add", f"{topo.HOST_ADDRESS}/32", "dev", topo.HOST_IFACE])
    _run(["ip", "link", "set", topo.HOST_IFACE, "up"])
    _run(["ip", "link", "set", peer, "up"])
    _run(["ip", "route", "add", "unreachable", str(topo.TEST_RANGE)])
    for node in topo.NODES:
        ns, veth = node.netns, node.host_veth
        _run(["ip", "netns", "add", ns])
        _run(["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns])
        _run(["ip", "addr", "add", f"{node.gateway}/24", "dev", veth])
        _run(["ip", "link", "set", veth, "up"])
        _run(["ip", "-n", ns, "link", "set", "lo", "up"])
        _run(["ip", "-n", ns, "addr", "add", f"{node.netns_ip}/24", "dev", "eth0"])
        _run(["ip", "-n", ns, "link", "set", "eth0", "up"])
        _run(["ip", "-n", ns, "route", "add", str(topo.TEST_RANGE), "via", node.gateway])
        # The node namespace routes between the host and its pods' namespaces (each pod
        # has its own, see harness.kubelet.IPAM) and answers ARP for them on eth0.
        # Namespace-local sysctls: the host's settings are untouched.
        _run(["ip", "netns", "exec", ns, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1",
              "net.ipv4.conf.eth0.proxy_arp=1"])  # fmt: skip
        # Forward only between our veths (pod to pod across nodes, pod to apiserver);
        # the per-interface switch leaves the host's global ip_forward untouched.
        pathlib.Path(f"/proc/sys/net/ipv4/conf/{veth}/forwarding").write_text("1\n")


def _pod_namespaces() -> list[str]:
    netns_dir = pathlib.Path("/run/netns")
    if not netns_dir.exists():
        return []
    return sorted(p.name for p in netns_dir.iterdir() if p.name.startswith(topo.POD_NETNS_PREFIX))


def delete_pod_namespaces() -> None:
    """Kill what still runs in pod namespaces and delete them (teardown, runtime restart)."""
    for ns in _pod_namespaces():
        pids = _run(["ip", "netns", "pids", ns], check=False, quiet=True).stdout
        for pid in pids.split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        _run(["ip", "netns", "del", ns], check=False, quiet=True)


def teardown_network() -> None:
    delete_pod_namespaces()
    for node in topo.NODES:
        if _netns_exists(node.netns):
            pids = _run(["ip", "netns", "pids", node.netns], check=False, quiet=True).stdout
            for pid in pids.split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
            _run(["ip", "netns", "del", node.netns], check=False)
        if _link_exists(node.host_veth):
            _run(["ip", "link", "del", node.host_veth], check=False, quiet=True)
    if _link_exists(topo.HOST_IFACE):
        _run(["ip", "link", "del", topo.HOST_IFACE], check=False)
    routes = _run(["ip", "route", "show", "type", "unreachable"], check=False, quiet=True).stdout
    if str(topo.TEST_RANGE) in routes:
        _run(["ip", "route", "del", "unreachable", str(topo.TEST_RANGE)], check=False)


# --------------------------------------------------------------------------- readiness


def _ssl_context(user: str = "admin") -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(CERTS / "ca.crt"))
    ctx.load_cert_chain(str(CERTS / f"{user}.crt"), str(CERTS / f"{user}.key"))
    return ctx


def api_get(path: str, *, timeout: float = 5.0) -> Any:
    """GET on the apiserver as admin (stdlib only, usable before any client is set up)."""
    url = topo.apiserver_url() + path
    with urllib.request.urlopen(url, context=_ssl_context(), timeout=timeout) as resp:
        body = resp.read()
    try:
        return json.loads(body)
    except ValueError:
        return body.decode()


def _wait(what: str, check: Callable[[], bool], *, timeout: float, proc: str | None = None) -> None:
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


def _port_open(port: int) -> bool:
    """Is anything listening on TCP `port`, on any address?"""
    out = subprocess.run(
        ["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True, check=False
    ).stdout
    return bool(out.strip())


def _nodes_ready() -> bool:
    nodes = api_get("/api/v1/nodes")["items"]
    ready = {
        n["metadata"]["name"]
        for n in nodes
        for c in n.get("status", {}).get("conditions", [])
        if c["type"] == "Ready" and c["status"] == "True"
    }
    return ready >= {n.name for n in topo.NODES}


def _default_sa() -> bool:
    api_get("/api/v1/namespaces/default/serviceaccounts/default")
    return True


def _prometheus_ready() -> bool:
    with urllib.request.urlopen(topo.prometheus_url() + "/-/ready", timeout=1) as resp:
        return bool(resp.status == 200)


# --------------------------------------------------------------------------- components


def _bin(name: str) -> str:
    return str(topo.bin_dir() / name)


def ensure_binaries() -> None:
    missing = [
        n
        for n in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
        if not (topo.bin_dir() / n).exists()
    ]
    if missing:
        _log(f"missing {', '.join(missing)}: building with e2e/tools/build.sh (minutes, once)")
        res = subprocess.run(["bash", str(topo.TOOLS / "build.sh")], check=False)
        if res.returncode != 0:
            raise ClusterError(f"e2e/tools/build.sh failed ({res.returncode}); see its output")


def ensure_prometheus() -> str:
    path = shutil.which("prometheus")
    if path is None:
        raise ClusterError(
            "prometheus is not installed: run `make prometheus-install` "
            "(apt-get install prometheus; it starts no service)"
        )
    return path


def _start_etcd() -> None:
    ETCD_DATA.mkdir(parents=True, exist_ok=True)
    client = f"http://127.0.0.1:{topo.ETCD_CLIENT_PORT}"
    peer = f"http://127.0.0.1:{topo.ETCD_PEER_PORT}"
    _start(
        "etcd",
        [
            _bin("etcd"),
            "--name=modelscale",
            f"--data-dir={ETCD_DATA}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=modelscale={peer}",
            "--unsafe-no-fsync=true",  # test data: durability is not worth the fsync cost
            "--log-level=warn",
        ],
    )


def _start_apiserver() -> None:
    _start(
        "kube-apiserver",
        [
            _bin("kube-apiserver"),
            f"--etcd-servers=http://127.0.0.1:{topo.ETCD_CLIENT_PORT}",
            # One address cannot be both loopback (host clients) and reachable from the node
            # namespaces (pods such as the operator), so listen on all; advertise the
            # 198.18 address because the `kubernetes` EndpointSlice rejects loopback.
            "--bind-address=0.0.0.0",
            f"--secure-port={topo.APISERVER_PORT}",
            f"--advertise-address={topo.HOST_ADDRESS}",
            f"--tls-cert-file={CERTS / 'apiserver.crt'}",
            f"--tls-private-key-file={CERTS / 'apiserver.key'}",
            f"--client-ca-file={CERTS / 'ca.crt'}",
            "--authorization-mode=Node,RBAC",
            # `kubectl logs` goes apiserver -> the pod runtime's kubelet API, both ways TLS.
            "--kubelet-preferred-address-types=InternalIP",
            f"--kubelet-certificate-authority={CERTS / 'ca.crt'}",
            f"--kubelet-client-certificate={CERTS / 'apiserver-kubelet-client.crt'}",
            f"--kubelet-client-key={CERTS / 'apiserver-kubelet-client.key'}",
            "--enable-admission-plugins=NodeRestriction",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={CERTS / 'sa.pub'}",
            f"--service-account-signing-key-file={CERTS / 'sa.key'}",
            f"--service-cluster-ip-range={topo.SERVICE_CIDR}",
            "--allow-privileged=true",
            f"--cert-dir={CERTS}",
            "--profiling=false",
            "--v=1",
        ],
    )


def _start_controller_manager() -> None:
    _start(
        "kube-controller-manager",
        [
            _bin("kube-controller-manager"),
            f"--kubeconfig={CERTS / 'kube-controller-manager.kubeconfig'}",
            "--secure-port=0",  # nothing scrapes it; one listening port fewer
            "--leader-elect=false",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={CERTS / 'sa.key'}",
            f"--root-ca-file={CERTS / 'ca.crt'}",
            f"--cluster-signing-cert-file={CERTS / 'ca.crt'}",
            f"--cluster-signing-key-file={CERTS / 'ca.key'}",
            f"--service-cluster-ip-range={topo.SERVICE_CIDR}",
            "--controllers=*",
            "--v=1",
        ],
    )


def _start_scheduler() -> None:
    _start(
        "kube-scheduler",
        [
            _bin("kube-scheduler"),
            f"--kubeconfig={CERTS / 'kube-scheduler.kubeconfig'}",
            "--secure-port=0",
            "--leader-elect=false",
            "--v=1",
        ],
    )


def _start_kubelet() -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(topo.REPO / "e2e"), env.get("PYTHONPATH", "")) if p
    )
    env["PYTHONUNBUFFERED"] = "1"
    _start("kubelet", [sys.executable, "-m", "harness.kubelet"], env=env)


SD_FILE = topo.STATE / "prometheus-sd" / "pods.json"


def prometheus_config(*, kubernetes_sd_kubeconfig: str | None = None) -> dict[str, Any]:
    """Scrape every Running pod annotated `prometheus.io/scrape: "true"` each second.

    Debian's prometheus 2.42 is built without `kubernetes_sd_configs` (its Go client
    dependencies are not packaged), so the pod runtime writes the pods it sees on the
    API to a file_sd file with the same `__meta_kubernetes_pod_*` labels the Kubernetes
    SD would produce; the relabelling below is the standard one and works unchanged
    with `kubernetes_sd_configs: [{role: pod}]` on a real cluster (e2e/kind)."""
    relabel: list[dict[str, Any]] = [
        {
            "source_labels": ["__meta_kubernetes_pod_annotation_prometheus_io_scrape"],
            "action": "keep",
            "regex": "true",
        },
        {"source_labels": ["__meta_kubernetes_pod_phase"], "action": "keep", "regex": "Running"},
        {
            "source_labels": ["__address__", "__meta_kubernetes_pod_annotation_prometheus_io_port"],
            "action": "replace",
            "regex": r"([^:]+)(?::\d+)?;(\d+)",
            "replacement": "$1:$2",
            "target_label": "__address__",
        },
        {
            "source_labels": ["__meta_kubernetes_pod_annotation_prometheus_io_path"],
            "action": "replace",
            "regex": "(.+)",
            "target_label": "__metrics_path__",
        },
        {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
        {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
        {"source_labels": ["__meta_kubernetes_pod_node_name"], "target_label": "node"},
        {
            "source_labels": ["__meta_kubernetes_pod_label_modelscale_dev_modeldeployment"],
            "target_label": "modeldeployment",
        },
    ]
    sd: dict[str, Any] = {"file_sd_configs": [{"files": [str(SD_FILE)], "refresh_interval": "5s"}]}
    if kubernetes_sd_kubeconfig is not None:  # an upstream Prometheus (e2e/kind)
        sd = {
            "kubernetes_sd_configs": [{"role": "pod", "kubeconfig_file": kubernetes_sd_kubeconfig}]
        }
    return {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [{"job_name": "kubernetes-pods", **sd, "relabel_configs": relabel}],
    }


def start_prometheus() -> None:
    """Start Prometheus (idempotent) and wait until it is ready."""
    if _recorded_pid("prometheus") is not None:
        return
    binary = ensure_prometheus()
    PROM_DATA.mkdir(parents=True, exist_ok=True)
    SD_FILE.parent.mkdir(parents=True, exist_ok=True)
    if not SD_FILE.exists():
        SD_FILE.write_text("[]\n")
    cfg = topo.STATE / "prometheus.yml"
    cfg.write_text(yaml.safe_dump(prometheus_config(), sort_keys=False))
    _start(
        "prometheus",
        [
            binary,
            f"--config.file={cfg}",
            f"--storage.tsdb.path={PROM_DATA}",
            f"--web.listen-address={topo.HOST_ADDRESS}:{topo.PROMETHEUS_PORT}",
            "--web.enable-lifecycle",
            "--storage.tsdb.retention.time=1d",
            "--log.level=warn",
        ],
    )
    _wait("Prometheus /-/ready", _prometheus_ready, timeout=30, proc="prometheus")


def stop_prometheus() -> None:
    """Stop Prometheus (for tests of 'metrics source gone'); its data stays. It is shared
    by every session using the cluster: restart it promptly (`prometheus_stopped`)."""
    _stop("prometheus")


@contextlib.contextmanager
def prometheus_stopped() -> Iterator[None]:
    """Prometheus is down inside the block and ready again after it."""
    stop_prometheus()
    try:
        yield
    finally:
        start_prometheus()


# --------------------------------------------------------------------------- up / down


def running() -> bool:
    """True when every component recorded in .cluster/pids is alive and the API answers."""
    if any(_recorded_pid(c) is None for c in COMPONENTS):
        return False
    try:
        return bool(api_get("/readyz", timeout=2) == "ok")
    except (OSError, urllib.error.URLError):
        return False


def _check_root() -> None:
    if os.geteuid() != 0:
        raise ClusterError(
            "the local cluster needs root (network namespaces for pod IPs); "
            "without root use the kind path: see e2e/kind/README.md (make e2e-kind)"
        )


def _check_ports() -> None:
    busy = [p for p in PORTS if _port_open(p)]
    if busy:
        raise ClusterError(f"ports {busy} are in use by another process (see `ss -ltnp`)")


def up() -> ClusterInfo:
    """Bring the cluster up, or report the one already running (no-op)."""
    _check_root()
    if running():
        _log("cluster already running")
        return info()
    if any(_recorded_pid(c) is not None for c in COMPONENTS):
        _log("a partial cluster is running: stopping it first")
    down(quiet=True)
    ensure_binaries()
    ensure_prometheus()
    _check_ports()
    topo.STATE.mkdir(parents=True, exist_ok=True)
    if LOGS.exists():  # keep the previous run's logs for post-mortems
        prev = topo.STATE / "logs.prev"
        shutil.rmtree(prev, ignore_errors=True)
        LOGS.rename(prev)
    started = time.monotonic()
    try:
        _start_all()
    except BaseException:
        down(quiet=True)  # no half cluster left behind; logs stay for the post-mortem
        raise
    FINGERPRINT.write_text(_fingerprint() + "\n")
    ENV_FILE.write_text(
        f"KUBECONFIG={topo.kubeconfig_path()}\nPROMETHEUS_URL={topo.prometheus_url()}\n"
    )
    _log(f"cluster up in {time.monotonic() - started:.1f} s")
    return info()


def _start_all() -> None:
    ensure_certs()
    _write_kubeconfigs()
    setup_network()
    _start_etcd()
    _wait("etcd", lambda: _port_open(topo.ETCD_CLIENT_PORT), timeout=30, proc="etcd")
    _start_apiserver()
    _wait("kube-apiserver /readyz", lambda: api_get("/readyz", timeout=2) == "ok",
          timeout=90, proc="kube-apiserver")  # fmt: skip
    _start_controller_manager()
    _start_scheduler()
    _start_kubelet()
    start_prometheus()
    _wait("3 fake nodes Ready", _nodes_ready, timeout=60, proc="kubelet")
    _wait("the default ServiceAccount (controller-manager working)", _default_sa,
          timeout=60, proc="kube-controller-manager")  # fmt: skip


def down(*, quiet: bool = False) -> None:
    """Stop everything `up` started and delete the namespaces, veths and routes."""
    for name in COMPONENTS:
        _stop(name, grace=15.0 if name == "kubelet" else 10.0)
    # Safety net for pod processes the runtime could not stop (it records their pids).
    for pid_file in PODS.glob("**/*.pid") if PODS.exists() else []:
        with contextlib.suppress(ValueError, OSError):
            pid = int(pid_file.read_text().split()[0])
            if _alive(pid):
                _kill_group(pid, grace=2.0)
    teardown_network()
    for d in (ETCD_DATA, PROM_DATA, PODS, PIDS, SD_FILE.parent, USERS):
        shutil.rmtree(d, ignore_errors=True)
    ENV_FILE.unlink(missing_ok=True)
    SESSION_STARTED.unlink(missing_ok=True)
    if not quiet:
        _log("cluster down")


def leftovers() -> list[str]:
    """What `down` should have removed but did not (empty when clean)."""
    found = [f"netns {n.netns}" for n in topo.NODES if _netns_exists(n.netns)]
    found += [f"netns {ns}" for ns in _pod_namespaces()]
    found += [f"link {n.host_veth}" for n in topo.NODES if _link_exists(n.host_veth)]
    if _link_exists(topo.HOST_IFACE):
        found.append(f"link {topo.HOST_IFACE}")
    for port in (*PORTS, topo.KUBELET_PORT):
        if _port_open(port):
            found.append(f"port {port}")
    found += [f"process {c}" for c in COMPONENTS if _recorded_pid(c) is not None]
    return found


def _fingerprint() -> str:
    """Hash of the harness code that shapes a running cluster."""
    h = hashlib.sha256()
    for name in ("cluster.py", "kubelet.py", "kubelet_server.py", "topology.py", "triton.py"):
        with contextlib.suppress(OSError):
            h.update((pathlib.Path(__file__).parent / name).read_bytes())
    return h.hexdigest()[:16]


def _running_fingerprint() -> str:
    try:
        return FINGERPRINT.read_text().strip()
    except OSError:
        return ""


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    """Serialise up/down between concurrent callers (several pytest sessions share it)."""
    # Machine-wide (netns names and ports are), and outside .cluster/ so that removing
    # the state directory cannot split the lock.
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with LOCK.open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def _other_users() -> list[int]:
    users = []
    for f in USERS.glob("*") if USERS.exists() else []:
        pid = int(f.name) if f.name.isdigit() else -1
        if pid != os.getpid() and pid > 0 and _alive(pid):
            users.append(pid)
        elif pid != os.getpid():
            f.unlink(missing_ok=True)
    return users


@contextlib.contextmanager
def session() -> Iterator[ClusterInfo]:
    """Reuse a running cluster, or bring one up. A cluster started by a pytest session is
    taken down by the last live session using it (sessions register in .cluster/users/);
    one started by `make cluster-up` stays up."""
    _check_root()
    with _locked():
        if running() and _fingerprint() != _running_fingerprint() and not _other_users():
            # Engineers edit the harness while clusters run: test the code in the checkout.
            _log("the running cluster was started by other harness code: restarting it")
            down(quiet=True)
        if not running():
            up()
            SESSION_STARTED.touch()  # the last session out takes it down
        ci = info()
        USERS.mkdir(parents=True, exist_ok=True)
        (USERS / str(os.getpid())).touch()
    try:
        yield ci
    finally:
        with _locked():
            (USERS / str(os.getpid())).unlink(missing_ok=True)
            if SESSION_STARTED.exists() and not _other_users():
                down()


def _print_env(ci: ClusterInfo) -> None:
    print(f"export KUBECONFIG={ci.kubeconfig}")
    print(f"# Prometheus: {ci.prometheus_url}")
    print(f"# kubectl:    {ci.bin_dir / 'kubectl'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.cluster", description=__doc__)
    parser.add_argument(
        "command",
        choices=[
            "up",
            "down",
            "status",
            "env",
            "start-prometheus",
            "stop-prometheus",
            "prometheus-config",
        ],
    )
    parser.add_argument(
        "--force", action="store_true", help="down: even while pytest sessions use it"
    )
    parser.add_argument(
        "--kubernetes-sd",
        metavar="KUBECONFIG",
        help="prometheus-config: use kubernetes_sd_configs with this kubeconfig (kind path)",
    )
    args = parser.parse_args(argv)
    try:
        if args.command == "up":
            _check_root()
            with _locked():
                ci = up()
            _print_env(ci)
        elif args.command == "down":
            _check_root()
            with _locked():
                users = _other_users()
                if users and not args.force:
                    _log(f"pytest sessions {users} are using the cluster; not stopping it "
                         "(wait for them, or `down --force`)")  # fmt: skip
                    return 1
                down()
            rest = leftovers()
            if rest:
                _log(f"left behind: {rest}")
                return 1
        elif args.command == "status":
            if not running():
                print("not running")
                return 1
            _print_env(info())
        elif args.command == "env":
            _print_env(info())
        elif args.command == "start-prometheus":
            start_prometheus()
        elif args.command == "stop-prometheus":
            stop_prometheus()
        elif args.command == "prometheus-config":
            cfg = prometheus_config(kubernetes_sd_kubeconfig=args.kubernetes_sd)
            print(yaml.safe_dump(cfg, sort_keys=False), end="")
    except ClusterError as err:
        _log(f"error: {err}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
