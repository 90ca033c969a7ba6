"""Pod Security of the Triton pods: restricted-compatible defaults, and the allow-list of
what a ModelDeployment may change about them. Pure.

The defaults pass Kubernetes' Pod Security Standard `restricted` (the checks of
k8s.io/pod-security-admission, policy version `latest`): non-root (uid 1000, the
`triton-server` user of NVIDIA's Triton images), no privilege escalation, every capability
dropped, the runtime's default seccomp profile. The root filesystem stays writable (vLLM,
Triton's Python backend and Hugging Face write caches under `$HOME` and `/tmp`);
`restricted` does not ask for a read-only one. The only memory-backed mount Triton needs,
`/dev/shm`, is an emptyDir (`spec.server.shmSize`).

`spec.server.podTemplate` may change the security contexts and add volumes: anything that
would give the pod more power than `restricted` allows (privileged, added capabilities,
root, host paths, an unconfined seccomp or AppArmor profile, unmasked /proc, host-process
containers, unsafe sysctls) is refused with a message naming the field, unless the
operator runs with `--allow-privileged-pods` (chart value `podSecurity.allowPrivileged`).
Host namespaces (`hostNetwork`, `hostPID`, `hostIPC`) and `hostUsers` have no field in the
override at all, so the CRD schema refuses them."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from modelscale.api import v1alpha1
from modelscale.api.v1alpha1 import ModelDeployment

TRITON_UID = 1000
"""`triton-server` in nvcr.io/nvidia/tritonserver images (their default user is root)."""

POD_DEFAULTS: Mapping[str, Any] = {
    "runAsNonRoot": True,
    "runAsUser": TRITON_UID,
    "runAsGroup": TRITON_UID,
    # Volumes (emptyDir, a PVC with the models) are group-writable by the server's group.
    "fsGroup": TRITON_UID,
    "seccompProfile": {"type": "RuntimeDefault"},
}
CONTAINER_DEFAULTS: Mapping[str, Any] = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
}

# Pod Security `restricted`: the volume types a pod may use.
ALLOWED_VOLUME_TYPES = frozenset(
    {
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "image",
        "persistentVolumeClaim",
        "projected",
        "secret",
    }
)
# Pod Security `baseline`: sysctls that are namespaced and safe.
SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
    }
)
ALLOWED_CAPABILITIES = frozenset({"NET_BIND_SERVICE"})  # what `restricted` lets a pod add
_VOLUME_META = frozenset({"name"})

OVERRIDE = "spec.server.podTemplate"
FIX = (
    "remove it, or ask the cluster admin to install the operator with "
    "podSecurity.allowPrivileged=true"
)


@dataclass(frozen=True)
class Violation:
    """One setting that would give the pod more power than Pod Security `restricted`."""

    field: str
    """Path as the user wrote it, e.g. `spec.server.podTemplate.volumes[0].hostPath`."""
    problem: str


def pod_security_context(md: ModelDeployment) -> dict[str, Any]:
    """The pod's `securityContext`: the restricted defaults, then the override's keys."""
    override = md.spec.server.pod_template or v1alpha1.PodTemplateOverride()
    return {**_copy(POD_DEFAULTS), **_copy(override.security_context or {})}


def container_security_context(md: ModelDeployment) -> dict[str, Any]:
    """The Triton container's `securityContext`: the defaults, then the override's keys
    (a key replaces ours whole: `capabilities` given by the user replaces `drop: [ALL]`)."""
    override = md.spec.server.pod_template or v1alpha1.PodTemplateOverride()
    given = _copy(override.container_security_context or {})
    ours = _copy(CONTAINER_DEFAULTS)
    if given.get("privileged") or "SYS_ADMIN" in (given.get("capabilities") or {}).get("add", ()):
        # The apiserver refuses `allowPrivilegeEscalation: false` next to either (an
        # allowed privileged pod would never be created).
        del ours["allowPrivilegeEscalation"]
    return {**ours, **given}


def violations(md: ModelDeployment) -> list[Violation]:
    """Everything in the spec that Pod Security `restricted` would refuse."""
    override = md.spec.server.pod_template
    if override is None:
        return []
    found = list(_context(f"{OVERRIDE}.securityContext", override.security_context or {}))
    found += _context(
        f"{OVERRIDE}.containerSecurityContext", override.container_security_context or {}
    )
    found += _container_only(
        f"{OVERRIDE}.containerSecurityContext", override.container_security_context or {}
    )
    found += _pod_only(f"{OVERRIDE}.securityContext", override.security_context or {})
    for i, volume in enumerate(override.volumes):
        for kind in sorted(set(volume) - _VOLUME_META - ALLOWED_VOLUME_TYPES):
            found.append(
                Violation(
                    f"{OVERRIDE}.volumes[{i}].{kind}",
                    f"volume type {kind} is not allowed (allowed: "
                    f"{', '.join(sorted(ALLOWED_VOLUME_TYPES))})",
                )
            )
    return found


def refusal(md: ModelDeployment, *, allow_privileged: bool) -> str | None:
    """The message refusing the spec, or None when it may run."""
    if allow_privileged:
        return None
    found = violations(md)
    if not found:
        return None
    listed = "; ".join(f"{v.field}: {v.problem}" for v in found)
    return f"refused by the operator's pod security policy (restricted): {listed}; {FIX}"


def _context(path: str, ctx: Mapping[str, Any]) -> Iterator[Violation]:
    """Checks shared by the pod and the container security context."""
    if ctx.get("runAsUser") == 0:
        yield Violation(f"{path}.runAsUser", "must not be 0 (root)")
    if ctx.get("runAsNonRoot") is False:
        yield Violation(f"{path}.runAsNonRoot", "must not be false")
    seccomp = (ctx.get("seccompProfile") or {}).get("type")
    if seccomp is not None and seccomp not in ("RuntimeDefault", "Localhost"):
        yield Violation(f"{path}.seccompProfile.type", f"{seccomp} is not allowed")
    apparmor = (ctx.get("appArmorProfile") or {}).get("type")
    if apparmor is not None and apparmor not in ("RuntimeDefault", "Localhost"):
        yield Violation(f"{path}.appArmorProfile.type", f"{apparmor} is not allowed")
    selinux = (ctx.get("seLinuxOptions") or {}).get("type")
    if selinux not in (None, "", "container_t", "container_init_t", "container_kvm_t"):
        yield Violation(f"{path}.seLinuxOptions.type", f"{selinux} is not allowed")
    for key in ("user", "role"):
        if (ctx.get("seLinuxOptions") or {}).get(key):
            yield Violation(f"{path}.seLinuxOptions.{key}", "must not be set")
    if (ctx.get("windowsOptions") or {}).get("hostProcess"):
        yield Violation(f"{path}.windowsOptions.hostProcess", "must not be true")


def _container_only(path: str, ctx: Mapping[str, Any]) -> Iterator[Violation]:
    if ctx.get("privileged"):
        yield Violation(f"{path}.privileged", "must not be true")
    if ctx.get("allowPrivilegeEscalation"):
        yield Violation(f"{path}.allowPrivilegeEscalation", "must not be true")
    capabilities = ctx.get("capabilities") or {}
    added = sorted(set(capabilities.get("add") or ()) - ALLOWED_CAPABILITIES)
    if added:
        yield Violation(f"{path}.capabilities.add", f"{', '.join(added)} must not be added")
    if "capabilities" in ctx and "ALL" not in (capabilities.get("drop") or ()):
        yield Violation(f"{path}.capabilities.drop", "must include ALL")
    if ctx.get("procMount") not in (None, "Default"):
        yield Violation(f"{path}.procMount", f"{ctx['procMount']} is not allowed")


def _pod_only(path: str, ctx: Mapping[str, Any]) -> Iterator[Violation]:
    for i, sysctl in enumerate(ctx.get("sysctls") or ()):
        name = sysctl.get("name") if isinstance(sysctl, Mapping) else None
        if name not in SAFE_SYSCTLS:
            yield Violation(f"{path}.sysctls[{i}]", f"sysctl {name} is not a safe sysctl")


def _copy(value: Mapping[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(dict(value))
