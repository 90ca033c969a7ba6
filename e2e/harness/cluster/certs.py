"""The cluster CA, serving and client certificates (openssl CLI) and kubeconfigs."""

from __future__ import annotations

import base64
import pathlib
import shutil
import ssl
from typing import Any

import yaml

from harness import topology as topo
from harness.cluster.processes import run
from harness.cluster.state import CERTS, log


def _openssl_leaf(name: str, *, subject: str, usage: str, sans: str = "", ca: str = "ca") -> None:
    """EC P-256 leaf certificate signed by the cluster CA, or by `ca` (openssl CLI: the venv
    has no `cryptography`, and openssl 3 does this in two commands)."""
    key, csr, crt = CERTS / f"{name}.key", CERTS / f"{name}.csr", CERTS / f"{name}.crt"
    ext = CERTS / f"{name}.ext"
    lines = ["basicConstraints=CA:FALSE", "keyUsage=critical,digitalSignature,keyEncipherment"]
    lines.append(f"extendedKeyUsage={usage}")
    if sans:
        lines.append(f"subjectAltName={sans}")
    ext.write_text("\n".join(lines) + "\n")
    run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
          "-out", str(key)])  # fmt: skip
    run(["openssl", "req", "-new", "-key", str(key), "-subj", subject, "-out", str(csr)])
    run(["openssl", "x509", "-req", "-in", str(csr), "-CA", str(CERTS / f"{ca}.crt"),
          "-CAkey", str(CERTS / f"{ca}.key"), "-CAcreateserial", "-days", "3650",
          "-extfile", str(ext), "-out", str(crt)])  # fmt: skip
    csr.unlink()
    ext.unlink()


def _openssl_ca(name: str, *, subject: str) -> None:
    run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
          "-out", str(CERTS / f"{name}.key")])  # fmt: skip
    run(["openssl", "req", "-x509", "-new", "-key", str(CERTS / f"{name}.key"), "-days", "3650",
          "-subj", subject, "-out", str(CERTS / f"{name}.crt"),
          "-addext", "basicConstraints=critical,CA:TRUE",
          "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature"])  # fmt: skip


CLIENTS = {
    # name: subject (O = group, CN = user); RBAC bootstrap roles exist for the system users.
    "admin": "/O=system:masters/CN=kubernetes-admin",
    "kube-controller-manager": "/CN=system:kube-controller-manager",
    "kube-scheduler": "/CN=system:kube-scheduler",
    "kubelet": "/O=system:masters/CN=modelscale-harness-kubelet",
}


CERTS_VERSION = "3"  # bump when the set of certificates changes


def ensure_certs() -> None:
    done = CERTS / "done"
    if done.exists() and done.read_text().strip() == CERTS_VERSION:
        return
    shutil.rmtree(CERTS, ignore_errors=True)
    CERTS.mkdir(parents=True)
    log("generating certificates")
    _openssl_ca("ca", subject="/CN=modelscale-local-ca")
    # API aggregation (KEDA's metrics server): the apiserver proxies to extension
    # apiservers with a client certificate from its own CA, as kubeadm sets it up.
    _openssl_ca("front-proxy-ca", subject="/CN=front-proxy-ca")
    _openssl_leaf(
        "front-proxy-client", subject="/CN=front-proxy-client", usage="clientAuth",
        ca="front-proxy-ca",
    )  # fmt: skip
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
    run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048",
          "-out", str(CERTS / "sa.key")])  # fmt: skip
    run(["openssl", "pkey", "-in", str(CERTS / "sa.key"), "-pubout",
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


def write_kubeconfigs() -> None:
    for user in CLIENTS:
        path = CERTS / f"{user}.kubeconfig"
        path.write_text(yaml.safe_dump(kubeconfig_dict(server=topo.apiserver_url(), user=user)))
        path.chmod(0o600)
    shutil.copy(CERTS / "admin.kubeconfig", topo.kubeconfig_path())


def ssl_context(user: str = "admin") -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(CERTS / "ca.crt"))
    ctx.load_cert_chain(str(CERTS / f"{user}.crt"), str(CERTS / f"{user}.key"))
    return ctx
