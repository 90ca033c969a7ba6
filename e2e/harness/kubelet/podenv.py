"""A container's environment and credentials: env/envFrom from ConfigMaps, Secrets and the
downward API, and a kubeconfig with a token bound to the pod (its ServiceAccount's RBAC)."""

from __future__ import annotations

import base64
import pathlib
import re
from typing import Any

import yaml
from kubernetes.client.exceptions import ApiException

from harness import topology as topo
from harness.cluster import certs
from harness.kubelet.launch import PodSpecError, base_env, expand

# `core` is a kubernetes.client.CoreV1Api; its partial typing wants model objects while
# this code sends plain dicts, hence Any (as in runtime.Runtime).


def resolve_env(
    core: Any, pod: dict[str, Any], spec: dict[str, Any], *, pod_ip: str
) -> dict[str, str]:
    env = base_env(pod)
    ns = pod["metadata"]["namespace"]
    for src in spec.get("envFrom") or []:
        prefix = src.get("prefix", "")
        data: dict[str, str] = {}
        if "configMapRef" in src:
            ref = src["configMapRef"]
            data = _configmap(core, ns, ref["name"], optional=ref.get("optional", False))
        elif "secretRef" in src:
            ref = src["secretRef"]
            data = _secret(core, ns, ref["name"], optional=ref.get("optional", False))
        env.update({prefix + k: v for k, v in data.items()})
    for e in spec.get("env") or []:
        name = e["name"]
        if "value" in e:
            env[name] = expand(str(e["value"]), env)
            continue
        vf = e.get("valueFrom") or {}
        if "fieldRef" in vf:
            env[name] = _field(pod, vf["fieldRef"]["fieldPath"], pod_ip=pod_ip)
        elif "configMapKeyRef" in vf:
            ref = vf["configMapKeyRef"]
            data = _configmap(core, ns, ref["name"], optional=ref.get("optional", False))
            if ref["key"] in data:
                env[name] = data[ref["key"]]
        elif "secretKeyRef" in vf:
            ref = vf["secretKeyRef"]
            data = _secret(core, ns, ref["name"], optional=ref.get("optional", False))
            if ref["key"] in data:
                env[name] = data[ref["key"]]
        elif "resourceFieldRef" in vf:
            res = vf["resourceFieldRef"]["resource"]
            kind, _, rname = res.partition(".")
            value = ((spec.get("resources") or {}).get(kind) or {}).get(rname)
            env[name] = str(value) if value is not None else "0"
        else:
            env[name] = ""
    return env


def _field(pod: dict[str, Any], path: str, *, pod_ip: str) -> str:
    meta = pod["metadata"]
    m = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
    if m:
        return str((meta.get(m.group(1)) or {}).get(m.group(2), ""))
    node = next(n for n in topo.NODES if n.name == pod["spec"]["nodeName"])
    values = {
        "metadata.name": meta["name"],
        "metadata.namespace": meta["namespace"],
        "metadata.uid": meta["uid"],
        "spec.nodeName": pod["spec"]["nodeName"],
        "spec.serviceAccountName": pod["spec"].get("serviceAccountName", "default"),
        "status.podIP": pod_ip,
        "status.podIPs": pod_ip,
        "status.hostIP": node.internal_ip,
        "status.hostIPs": node.internal_ip,
    }
    return str(values.get(path, ""))


def _configmap(core: Any, ns: str, name: str, *, optional: bool) -> dict[str, str]:
    try:
        return dict(core.read_namespaced_config_map(name, ns).data or {})
    except ApiException as err:
        if optional and err.status == 404:
            return {}
        raise PodSpecError(
            "CreateContainerConfigError", f"configmap {name!r}: {err.reason}"
        ) from err


def _secret(core: Any, ns: str, name: str, *, optional: bool) -> dict[str, str]:
    try:
        data = core.read_namespaced_secret(name, ns).data or {}
    except ApiException as err:
        if optional and err.status == 404:
            return {}
        raise PodSpecError("CreateContainerConfigError", f"secret {name!r}: {err.reason}") from err
    return {k: base64.b64decode(v).decode() for k, v in data.items()}


def write_pod_kubeconfig(core: Any, pod: dict[str, Any], workdir: pathlib.Path) -> pathlib.Path:
    """A kubeconfig with a TokenRequest token bound to the pod, for its ServiceAccount:
    the process gets exactly the RBAC a real pod would."""
    meta = pod["metadata"]
    sa = pod["spec"].get("serviceAccountName") or "default"
    req = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {
            "expirationSeconds": 86400,
            "boundObjectRef": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": meta["name"],
                "uid": meta["uid"],
            },
        },
    }
    try:
        resp = core.create_namespaced_service_account_token(sa, meta["namespace"], req)
    except ApiException as err:
        raise PodSpecError(
            "CreateContainerConfigError",
            f"TokenRequest for serviceaccount {sa!r}: {err.reason}",
        ) from err
    user = f"system:serviceaccount:{meta['namespace']}:{sa}"
    cfg = certs.kubeconfig_dict(
        server=topo.apiserver_url(from_pod=True), user=user, token=resp.status.token
    )
    path = workdir / "kubeconfig"
    path.write_text(yaml.safe_dump(cfg))
    path.chmod(0o600)
    return path
