"""KEDA's images as local processes: the operator (`ghcr.io/kedacore/keda`) and the metrics
API server (`ghcr.io/kedacore/keda-metrics-apiserver`), built from the pinned module by
`e2e/tools/build.sh keda`. What a real node gives those containers and this runtime gives
them too: their Secret and emptyDir volumes (files kept in sync with the Secret, as the
kubelet does), credentials of the pod's ServiceAccount, and cluster DNS names of Services
(`<svc>.<ns>.svc.cluster.local`) through the pod's own /etc/hosts.

Where a real cluster differs: a Service name resolves to one ready endpoint's pod IP (no
kube-proxy, no ClusterIP), so a Service whose port differs from its targetPort cannot be
reached by name from a pod (KEDA's gRPC Service uses 9666 for both; the apiserver reaches
the metrics server through `--enable-aggregator-routing`, which dials endpoints)."""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import os
import pathlib
import shutil
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from harness import topology as topo
from harness.kubelet.launch import Launch, PodSpecError

OPERATOR, METRICS_SERVER = "keda", "keda-adapter"
IMAGE_HELP = (
    "*kedacore/keda* / *kedacore/keda-metrics-apiserver* (KEDA's operator and metrics "
    "server from the pinned module: `make keda-tools`)"
)
NETNS_ETC = pathlib.Path("/etc/netns")  # `ip netns exec` bind-mounts NETNS_ETC/<ns>/* on /etc
CLUSTER_DOMAIN = "cluster.local"
SERVICEACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def binary_for(image: str) -> str | None:
    """The KEDA binary an image name stands for, or None when it is not a KEDA image.
    Any tag: the binaries are built at the version e2e/tools/keda/go.mod pins."""
    repo = image.rsplit("@", 1)[0]
    last = repo.rsplit("/", 1)[-1]
    name = last.split(":", 1)[0]
    if "kedacore/" not in repo:
        return None
    return {"keda": OPERATOR, "keda-metrics-apiserver": METRICS_SERVER}.get(name)


def bin_dir() -> pathlib.Path:
    """The directory `e2e/tools/build.sh keda` fills (same derivation as the script)."""
    version = ""
    for line in (topo.TOOLS / "keda" / "go.mod").read_text().splitlines():
        if line.startswith("require github.com/kedacore/keda/v2 "):
            version = line.split()[2]
    if not version:
        raise RuntimeError("no 'require github.com/kedacore/keda/v2' line in e2e/tools/keda/go.mod")
    return topo.bin_dir().parent / f"keda-{version}"


@dataclasses.dataclass(frozen=True)
class Mount:
    path: str  # where the container expects it (e.g. /certs)
    host: pathlib.Path  # where this runtime keeps it


def sync_volumes(
    core: Any, pod: dict[str, Any], spec: dict[str, Any], workdir: pathlib.Path
) -> list[Mount]:
    """Materialise the container's Secret and emptyDir mounts under `workdir` and bring
    Secret files up to date. A missing non-optional Secret keeps the container waiting
    (CreateContainerConfigError, retried), as on a real node."""
    volumes = {v["name"]: v for v in pod["spec"].get("volumes") or []}
    mounts = []
    for vm in spec.get("volumeMounts") or []:
        vol = volumes.get(vm["name"])
        if vol is None:
            raise PodSpecError(
                "CreateContainerConfigError", f"volumeMount {vm['name']!r} has no volume"
            )
        if "projected" in vol and vm["mountPath"].startswith(SERVICEACCOUNT_DIR):
            continue  # the ServiceAccount token: the process gets a kubeconfig instead
        host = workdir.parent / "volumes" / vm["name"]
        host.mkdir(parents=True, exist_ok=True)
        if "secret" in vol:
            _sync_secret(core, pod["metadata"]["namespace"], vol["secret"], host)
        elif "emptyDir" not in vol:
            kinds = sorted(k for k in vol if k != "name")
            raise PodSpecError(
                "CreateContainerConfigError",
                f"volume {vm['name']!r}: only secret and emptyDir volumes are supported for KEDA "
                f"images by the harness (got {kinds})",
            )
        mounts.append(Mount(path=vm["mountPath"].rstrip("/") or "/", host=host))
    return mounts


def _sync_secret(core: Any, ns: str, src: dict[str, Any], host: pathlib.Path) -> None:
    try:
        data = core.read_namespaced_secret(src["secretName"], ns).data or {}
    except ApiException as err:
        if err.status == 404 and src.get("optional", False):
            return
        raise PodSpecError(
            "CreateContainerConfigError", f"secret {src['secretName']!r}: {err.reason}"
        ) from err
    for key, value in data.items():
        raw = base64.b64decode(value)
        path = host / key
        with contextlib.suppress(OSError):
            if path.read_bytes() == raw:
                continue
        tmp = host / f".{key}.tmp"
        tmp.write_bytes(raw)
        tmp.chmod(0o644)
        os.replace(tmp, path)  # readers never see half a certificate


def _rewrite(arg: str, mounts: list[Mount]) -> str:
    """A path argument (`/certs/tls.crt`, `--cert-dir=/certs`) under a mount, moved to
    this runtime's copy of the volume."""
    flag, eq, value = arg.partition("=") if arg.startswith("-") else ("", "", arg)
    if not eq and flag:
        return arg
    for m in sorted(mounts, key=lambda m: -len(m.path)):
        if value == m.path or value.startswith(m.path + "/"):
            return f"{flag}{eq}{m.host}{value[len(m.path) :]}"
    return arg


def launch(
    *,
    binary: str,
    args: list[str],
    env: dict[str, str],
    mounts: list[Mount],
    kubeconfig: pathlib.Path,
    namespace: str,
) -> Launch:
    """argv and env for a KEDA container: mount paths in its args point at this runtime's
    copies; the ServiceAccount's kubeconfig replaces the in-cluster token files."""
    exe = bin_dir() / binary
    if not exe.exists():
        raise PodSpecError(
            "ErrImagePull", f"{exe} is missing: build it with `make keda-tools` (minutes, once)"
        )
    argv = [str(exe), *(_rewrite(a, mounts) for a in args)]
    if binary == OPERATOR and not any(a.startswith("--cert-dir") for a in args):
        certs = next((m for m in mounts if m.path == "/certs"), None)
        if certs is not None:  # the operator's default --cert-dir is /certs
            argv.append(f"--cert-dir={certs.host}")
    if binary == METRICS_SERVER:
        argv += [
            f"--{k}-kubeconfig={kubeconfig}" for k in ("lister", "authentication", "authorization")
        ]
    full = dict(env)
    full["KUBECONFIG"] = str(kubeconfig)  # controller-runtime's GetConfig reads it
    # What KEDA would read from the ServiceAccount's mounted `namespace` file.
    full.setdefault("KEDA_CLUSTER_OBJECT_NAMESPACE", namespace)
    return Launch(argv=argv, env=full)


def write_hosts(api: Any, netns: str) -> None:
    """The pod's /etc/hosts: the host's own lines plus every Service with a ready endpoint
    under its cluster DNS names. Rewritten in place (the bind mount keeps the inode); Go's
    resolver re-reads it when it changes."""
    lines = [
        pathlib.Path("/etc/hosts").read_text().rstrip("\n"),
        "# Services (harness pod runtime)",
    ]
    resp = client.DiscoveryV1Api(api).list_endpoint_slice_for_all_namespaces(_preload_content=False)
    slices = json.loads(resp.data)
    seen = set()
    for es in slices.get("items", []):
        meta = es["metadata"]
        svc = (meta.get("labels") or {}).get("kubernetes.io/service-name")
        if not svc or (meta["namespace"], svc) in seen:
            continue
        ready = [
            a
            for ep in es.get("endpoints") or []
            if (ep.get("conditions") or {}).get("ready")
            for a in ep.get("addresses") or []
        ]
        if ready:
            seen.add((meta["namespace"], svc))
            ns = meta["namespace"]
            lines.append(f"{ready[0]} {svc}.{ns}.svc.{CLUSTER_DOMAIN} {svc}.{ns}.svc {svc}.{ns}")
    text = "\n".join(lines) + "\n"
    path = NETNS_ETC / netns / "hosts"
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        if path.read_text() == text:
            return
    with path.open("r+" if path.exists() else "w") as fh:
        fh.write(text)
        fh.truncate()


def remove_hosts(netns: str) -> None:
    shutil.rmtree(NETNS_ETC / netns, ignore_errors=True)
