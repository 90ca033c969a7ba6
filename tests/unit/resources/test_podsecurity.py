"""The Triton pods' security defaults and the allow-list of what a spec may change."""

from __future__ import annotations

from typing import Any

import pytest

from modelscale.api.v1alpha1 import ModelDeployment
from modelscale.resources import deployment, podsecurity


def md(pod_template: dict[str, Any] | None = None) -> ModelDeployment:
    server: dict[str, Any] = {}
    if pod_template is not None:
        server["podTemplate"] = pod_template
    return ModelDeployment.model_validate(
        {
            "apiVersion": "modelscale.dev/v1alpha1",
            "kind": "ModelDeployment",
            "metadata": {"name": "llama", "namespace": "serving", "uid": "u"},
            "spec": {"model": {"name": "llama", "repository": "/models"}, "server": server},
        }
    )


def test_default_pod_is_restricted_compatible() -> None:
    pod = deployment.pod_template(md())["spec"]
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "runAsGroup": 1000,
        "fsGroup": 1000,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert pod["containers"][0]["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }
    assert podsecurity.violations(md()) == []


def test_override_keys_replace_the_defaults_key_by_key() -> None:
    m = md(
        {
            "securityContext": {"runAsUser": 2000},
            "containerSecurityContext": {"readOnlyRootFilesystem": True},
        }
    )
    pod = deployment.pod_template(m)["spec"]
    assert pod["securityContext"]["runAsUser"] == 2000
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["containers"][0]["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
    }
    assert podsecurity.refusal(m, allow_privileged=False) is None


C = "containerSecurityContext"
P = "securityContext"


# Also run against the real apiserver's Pod Security admission
# (tests/integration/test_pod_security_apiserver.py): both must agree.
REFUSED = [
    pytest.param({C: {"privileged": True}}, f"{C}.privileged", id="privileged"),
    pytest.param(
        {C: {"allowPrivilegeEscalation": True}},
        f"{C}.allowPrivilegeEscalation",
        id="escalation",
    ),
    pytest.param(
        {C: {"capabilities": {"drop": ["ALL"], "add": ["SYS_ADMIN"]}}},
        f"{C}.capabilities.add",
        id="cap-add",
    ),
    pytest.param(
        {C: {"capabilities": {"drop": ["NET_RAW"]}}},
        f"{C}.capabilities.drop",
        id="cap-not-dropped",
    ),
    pytest.param({C: {"runAsUser": 0}}, f"{C}.runAsUser", id="container-root"),
    pytest.param({P: {"runAsUser": 0}}, f"{P}.runAsUser", id="pod-root"),
    pytest.param({P: {"runAsNonRoot": False}}, f"{P}.runAsNonRoot", id="run-as-root-allowed"),
    pytest.param(
        {P: {"seccompProfile": {"type": "Unconfined"}}},
        f"{P}.seccompProfile.type",
        id="seccomp-unconfined",
    ),
    pytest.param(
        {C: {"appArmorProfile": {"type": "Unconfined"}}},
        f"{C}.appArmorProfile.type",
        id="apparmor-unconfined",
    ),
    pytest.param({C: {"procMount": "Unmasked"}}, f"{C}.procMount", id="proc-unmasked"),
    pytest.param(
        {P: {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}},
        f"{P}.sysctls[0]",
        id="unsafe-sysctl",
    ),
    pytest.param(
        {C: {"windowsOptions": {"hostProcess": True}}},
        f"{C}.windowsOptions.hostProcess",
        id="host-process",
    ),
    pytest.param(
        {P: {"seLinuxOptions": {"type": "spc_t"}}}, f"{P}.seLinuxOptions.type", id="selinux-spc"
    ),
    pytest.param(
        {"volumes": [{"name": "h", "hostPath": {"path": "/"}}]},
        "volumes[0].hostPath",
        id="hostpath",
    ),
    pytest.param(
        {"volumes": [{"name": "n", "nfs": {"server": "x", "path": "/"}}]},
        "volumes[0].nfs",
        id="nfs",
    ),
]


@pytest.mark.parametrize(("override", "field"), REFUSED)
def test_what_restricted_forbids_is_refused_naming_the_field(
    override: dict[str, Any], field: str
) -> None:
    message = podsecurity.refusal(md(override), allow_privileged=False)
    assert message is not None
    assert f"spec.server.podTemplate.{field}:" in message
    assert "podSecurity.allowPrivileged=true" in message
    # The chart's explicit opt-in lets it through, unchanged.
    assert podsecurity.refusal(md(override), allow_privileged=True) is None


ALLOWED = [
    pytest.param(
        {"volumes": [{"name": "m", "persistentVolumeClaim": {"claimName": "models"}}]}, id="pvc"
    ),
    pytest.param(
        {
            "volumes": [
                {"name": "c", "configMap": {"name": "cfg"}},
                {"name": "e", "emptyDir": {}},
            ]
        },
        id="configmap-emptydir",
    ),
    pytest.param(
        {C: {"capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}},
        id="net-bind-service",
    ),
    pytest.param(
        {P: {"seccompProfile": {"type": "Localhost", "localhostProfile": "triton.json"}}},
        id="seccomp-localhost",
    ),
    pytest.param(
        {P: {"sysctls": [{"name": "net.ipv4.tcp_keepalive_time", "value": "60"}]}},
        id="safe-sysctl",
    ),
]


@pytest.mark.parametrize("override", ALLOWED)
def test_what_restricted_allows_passes(override: dict[str, Any]) -> None:
    assert podsecurity.refusal(md(override), allow_privileged=False) is None


@pytest.mark.parametrize("key", ["hostNetwork", "hostPID", "hostIPC", "hostUsers", "containers"])
def test_host_namespaces_have_no_field_in_the_override(key: str) -> None:
    with pytest.raises(ValueError, match=key):
        md({key: True})


@pytest.mark.parametrize(
    "given",
    [
        pytest.param({"privileged": True}, id="privileged"),
        pytest.param({"capabilities": {"add": ["SYS_ADMIN"]}}, id="sys-admin"),
    ],
)
def test_an_allowed_privileged_container_is_not_contradicted_by_our_defaults(
    given: dict[str, Any],
) -> None:
    # The apiserver refuses allowPrivilegeEscalation=false next to privileged or SYS_ADMIN.
    ctx = podsecurity.container_security_context(md({C: given}))
    assert "allowPrivilegeEscalation" not in ctx
    assert ctx.items() >= given.items()
