"""The control-plane components and the pod runtime: how each is started, and the
apiserver checks `up` waits on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from typing import Any

from harness import topology as topo
from harness.cluster.certs import ssl_context
from harness.cluster.processes import start
from harness.cluster.state import CERTS, ETCD_DATA, LOGS, ClusterError, log


def api_get(path: str, *, timeout: float = 5.0) -> Any:
    """GET on the apiserver as admin (stdlib only, usable before any client is set up)."""
    url = topo.apiserver_url() + path
    with urllib.request.urlopen(url, context=ssl_context(), timeout=timeout) as resp:
        body = resp.read()
    try:
        return json.loads(body)
    except ValueError:
        return body.decode()


def nodes_ready() -> bool:
    nodes = api_get("/api/v1/nodes")["items"]
    ready = {
        n["metadata"]["name"]
        for n in nodes
        for c in n.get("status", {}).get("conditions", [])
        if c["type"] == "Ready" and c["status"] == "True"
    }
    return ready >= {n.name for n in topo.NODES}


def default_sa() -> bool:
    api_get("/api/v1/namespaces/default/serviceaccounts/default")
    return True


def _bin(name: str) -> str:
    return str(topo.bin_dir() / name)


def ensure_binaries() -> None:
    missing = [
        n
        for n in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
        if not (topo.bin_dir() / n).exists()
    ]
    if missing:
        log(f"missing {', '.join(missing)}: building with e2e/tools/build.sh (minutes, once)")
        res = subprocess.run(["bash", str(topo.TOOLS / "build.sh")], check=False)
        if res.returncode != 0:
            raise ClusterError(f"e2e/tools/build.sh failed ({res.returncode}); see its output")


def start_etcd() -> None:
    ETCD_DATA.mkdir(parents=True, exist_ok=True)
    client = f"http://127.0.0.1:{topo.ETCD_CLIENT_PORT}"
    peer = f"http://127.0.0.1:{topo.ETCD_PEER_PORT}"
    start(
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


# The operator's ServiceAccount (e2e installs the chart into this namespace): its requests
# are audited at Metadata level, everyone else's not at all, so e2e can compare what the
# operator does with what its RBAC grants (e2e/tests/test_rbac_e2e.py).
OPERATOR_SA_GROUP = "system:serviceaccounts:modelscale-system"
AUDIT_LOG = LOGS / "audit.log"
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "Metadata", "userGroups": [OPERATOR_SA_GROUP]},
        {"level": "None"},
    ],
}


def start_apiserver() -> None:
    policy = CERTS / "audit-policy.json"
    policy.write_text(json.dumps(AUDIT_POLICY))
    start(
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
            # API aggregation (KEDA's external.metrics.k8s.io), as kubeadm configures it;
            # aggregator routing dials the APIService's endpoints (there is no kube-proxy).
            f"--requestheader-client-ca-file={CERTS / 'front-proxy-ca.crt'}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-username-headers=X-Remote-User",
            f"--proxy-client-cert-file={CERTS / 'front-proxy-client.crt'}",
            f"--proxy-client-key-file={CERTS / 'front-proxy-client.key'}",
            "--enable-aggregator-routing=true",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={CERTS / 'sa.pub'}",
            f"--service-account-signing-key-file={CERTS / 'sa.key'}",
            f"--service-cluster-ip-range={topo.SERVICE_CIDR}",
            "--allow-privileged=true",
            f"--cert-dir={CERTS}",
            "--profiling=false",
            f"--audit-policy-file={policy}",
            f"--audit-log-path={AUDIT_LOG}",
            "--audit-log-maxsize=64",  # MB, then rotated
            "--audit-log-maxbackup=2",
            "--v=1",
        ],
    )


def start_controller_manager() -> None:
    start(
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


def start_scheduler() -> None:
    start(
        "kube-scheduler",
        [
            _bin("kube-scheduler"),
            f"--kubeconfig={CERTS / 'kube-scheduler.kubeconfig'}",
            "--secure-port=0",
            "--leader-elect=false",
            "--v=1",
        ],
    )


def start_kubelet() -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(topo.REPO / "e2e"), env.get("PYTHONPATH", "")) if p
    )
    env["PYTHONUNBUFFERED"] = "1"
    start("kubelet", [sys.executable, "-m", "harness.kubelet"], env=env)
