"""KEDA on the local cluster: its release manifests, rendered from the pinned module
(`e2e/tools/keda/go.mod`) the way KEDA's own `make release` renders them, applied with
server-side apply as KEDA's install docs say; the pod runtime runs its images as the
binaries `e2e/tools/build.sh keda` builds.

Why the release manifests and not the Helm chart: the chart lives in another repository
(kedacore/charts) that neither the Go module proxy nor anything else this machine can
reach serves, while the manifests are generated from `config/` inside the very module the
binaries come from, so the two can never disagree about a version. One change from the
release file: the admission webhooks (a third binary, `keda-admission-webhooks`) are left
out, and the operator is told not to patch their configuration (what the chart does with
`webhooks.enabled=false`)."""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import tempfile
import time

import yaml

from harness import topology as topo
from harness.cluster.state import ClusterError, log

NAMESPACE = "keda"
APISERVICE = "v1beta1.external.metrics.k8s.io"
DEPLOYMENTS = ("keda-operator", "keda-metrics-apiserver")
UP_TIMEOUT = 180.0


def version() -> str:
    for line in (topo.TOOLS / "keda" / "go.mod").read_text().splitlines():
        if line.startswith("require github.com/kedacore/keda/v2 "):
            return line.split()[2]
    raise ClusterError("no 'require github.com/kedacore/keda/v2' line in e2e/tools/keda/go.mod")


def ensure_binaries() -> pathlib.Path:
    """Build (once, cached) KEDA's operator and metrics server; returns their directory."""
    res = subprocess.run(
        ["bash", str(topo.TOOLS / "build.sh"), "keda"],
        stdout=subprocess.PIPE,
        text=True,
        check=False,
    )
    if res.returncode != 0:
        raise ClusterError(f"e2e/tools/build.sh keda failed ({res.returncode}); see its output")
    return pathlib.Path(res.stdout.strip().splitlines()[-1])


def module_dir() -> pathlib.Path:
    """KEDA's source at the pinned version, from the Go module cache (downloads once)."""
    res = subprocess.run(
        ["go", "mod", "download", "-json", f"github.com/kedacore/keda/v2@{version()}"],
        cwd=topo.TOOLS / "keda",
        capture_output=True,
        text=True,
        check=False,
    )
    if res.returncode != 0:
        raise ClusterError(f"go mod download of KEDA {version()} failed: {res.stderr.strip()}")
    return pathlib.Path(json.loads(res.stdout)["Dir"])


def manifests() -> str:
    """KEDA's release manifests for the pinned version, without the admission webhooks."""
    v = version().removeprefix("v")
    with tempfile.TemporaryDirectory(prefix="modelscale-keda-") as tmp:
        config = pathlib.Path(tmp) / "config"
        shutil.copytree(module_dir() / "config", config)
        for p in config.rglob("*"):
            p.chmod(0o755 if p.is_dir() else 0o644)  # the module cache is read-only
        # What `make release` does: images at the release tag, version labels.
        transformer = config / "default" / "kustomize-config" / "metadataLabelTransformer.yaml"
        transformer.write_text(
            transformer.read_text().replace(
                "app.kubernetes.io/version: main", f"app.kubernetes.io/version: {v}"
            )
        )
        kust_path = config / "default" / "kustomization.yaml"
        kust = yaml.safe_load(kust_path.read_text())
        kust["resources"] = [r for r in kust["resources"] if r != "../webhooks"]
        kust["images"] = [
            {"name": f"ghcr.io/kedacore/{name}", "newTag": v}
            for name in ("keda", "keda-metrics-apiserver")
        ]
        kust["patches"] = [
            {
                "target": {"kind": "Deployment", "name": "keda-operator"},
                "patch": json.dumps(
                    [
                        {
                            "op": "add",
                            "path": "/spec/template/spec/containers/0/args/-",
                            "value": "--enable-webhook-patching=false",
                        }
                    ]
                ),
            }
        ]
        kust_path.write_text(yaml.safe_dump(kust))
        res = subprocess.run(
            [str(topo.bin_dir() / "kubectl"), "kustomize", str(config / "default")],
            capture_output=True,
            text=True,
            check=False,
        )
    if res.returncode != 0:
        raise ClusterError(f"kubectl kustomize of KEDA's config failed: {res.stderr.strip()}")
    return res.stdout


def kubectl(
    *args: str, stdin: str | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(
        [str(topo.bin_dir() / "kubectl"), f"--kubeconfig={topo.kubeconfig_path()}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
    )
    if check and res.returncode != 0:
        raise ClusterError(f"kubectl {' '.join(args)}: {res.stderr.strip()}")
    return res


def _ready() -> bool:
    for name in DEPLOYMENTS:
        d = json.loads(kubectl("-n", NAMESPACE, "get", "deployment", name, "-o", "json").stdout)
        if d.get("status", {}).get("availableReplicas", 0) < 1:
            return False
    svc = json.loads(kubectl("get", "apiservice", APISERVICE, "-o", "json").stdout)
    conds = {c["type"]: c["status"] for c in svc.get("status", {}).get("conditions", [])}
    if conds.get("Available") != "True":
        return False
    return (
        kubectl("get", "--raw", "/apis/external.metrics.k8s.io/v1beta1", check=False).returncode
        == 0
    )


def _why() -> str:
    """Each KEDA container's state and message, and the namespace's warnings."""
    lines = []
    pods = json.loads(
        kubectl("-n", NAMESPACE, "get", "pods", "-o", "json", check=False).stdout or "{}"
    )
    for pod in pods.get("items", []):
        for cs in pod.get("status", {}).get("containerStatuses") or []:
            lines.append(
                f"{pod['metadata']['name']}: ready={cs.get('ready')} {json.dumps(cs.get('state'))}"
            )
    warnings = kubectl(
        "-n", NAMESPACE, "get", "events", "--field-selector=type=Warning", check=False
    ).stdout
    return "\n".join([*lines, warnings])


def up() -> None:
    """Install KEDA on the running cluster and wait until HPAs can read external metrics
    through the aggregated API (idempotent)."""
    started = time.monotonic()
    ensure_binaries()
    kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=manifests())
    deadline = time.monotonic() + UP_TIMEOUT
    while not _ready():
        if time.monotonic() > deadline:
            raise ClusterError(
                f"KEDA not ready within {UP_TIMEOUT:.0f} s (pods below; their logs are in "
                f"{topo.STATE / 'logs' / 'pods'})\n{_why()}"
            )
        time.sleep(2)
    log(f"KEDA {version()} up in {time.monotonic() - started:.1f} s")


def down() -> None:
    """Uninstall KEDA. The APIService goes first: while it points at a missing server,
    discovery (kubectl, helm, kopf) reports the group as unavailable."""
    # ScaledObjects first, while the operator can still remove its finalizers.
    kubectl("delete", "scaledobjects.keda.sh", "--all", "-A", "--ignore-not-found", check=False)
    kubectl("delete", "apiservice", APISERVICE, "--ignore-not-found", check=False)
    kubectl(
        "delete", "--ignore-not-found", "--wait=true", "-f", "-", stdin=manifests(), check=False
    )
    log("KEDA removed")
