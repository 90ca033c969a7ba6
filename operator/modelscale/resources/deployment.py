"""The Deployment that runs the Triton pods of a ModelDeployment.

Choices a reader might question:
- Rolling updates surge one pod and take none down (`maxSurge: 1, maxUnavailable: 0`): with
  the warm-up readiness gate, a new pod counts as available only once warmed, so a rollout
  never removes serving capacity before its replacement is warm.
- The startup probe gives the model `server.startupTimeoutSeconds` to download and load
  before the liveness probe may restart the container; readiness and liveness then probe
  Triton's own `/v2/health/ready` and `/v2/health/live`.
- preStop sleeps `server.drainSeconds` (the kubelet's built-in sleep action, so the image
  needs no shell): the endpoint controllers remove the terminating pod from Services before
  Triton stops accepting requests. Triton then gets what is left of the grace period
  (`--exit-timeout-secs`) to finish in-flight requests.
- The server loads only `model.name` (`--model-control-mode=explicit --load-model=NAME`),
  so `/v2/health/ready` means "this model is loaded". A user arg with the same flag replaces
  the operator's (e.g. `--model-control-mode=poll`).
- Pods pass Pod Security `restricted` by default (`podsecurity`): non-root, no privilege
  escalation, no capabilities, seccomp RuntimeDefault.
- Triton's model-repository, logging and trace APIs require the ModelDeployment's control
  key (`resources.control`); the operator sends it when it loads the model with
  `spec.serving` before the warm-up.
- The pod template carries a hash of `spec.serving`: a policy change rolls the pods, and
  each new pod is loaded with the new policy before it is warmed up and gets traffic.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from typing import Any

from modelscale.api import v1alpha1
from modelscale.api.v1alpha1 import ModelDeployment
from modelscale.resources import control, names, podsecurity

CONTAINER = "triton"
ZONE_KEY = "topology.kubernetes.io/zone"
PROBE_PERIOD_SECONDS = 10
SERVING_HASH_ANNOTATION = "modelscale.dev/serving-policy-hash"


def build(md: ModelDeployment, *, replicas: int) -> dict[str, Any]:
    """The complete desired Deployment with `replicas` pods."""
    server = md.spec.server
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": names.metadata(md, name=names.deployment(md)),
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": names.selector(md)},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
            },
            "revisionHistoryLimit": 5,
            # A rollout is "stuck" only after a pod could have loaded and warmed up.
            "progressDeadlineSeconds": server.startup_timeout_seconds + 600,
            "template": pod_template(md),
        },
    }


def pod_template(md: ModelDeployment) -> dict[str, Any]:
    server = md.spec.server
    override = server.pod_template or v1alpha1.PodTemplateOverride()
    spec: dict[str, Any] = {
        "containers": [container(md)],
        "readinessGates": [{"conditionType": v1alpha1.WARMED_UP_CONDITION}],
        "terminationGracePeriodSeconds": server.termination_grace_period_seconds,
        "enableServiceLinks": False,
    }
    if server.service_account_name:
        spec["serviceAccountName"] = server.service_account_name
    else:
        # Triton never talks to the Kubernetes API: no token in the pod.
        spec["automountServiceAccountToken"] = False
    if server.image_pull_secrets:
        spec["imagePullSecrets"] = [{"name": name} for name in server.image_pull_secrets]
    if server.node_selector:
        spec["nodeSelector"] = dict(server.node_selector)
    if server.tolerations:
        spec["tolerations"] = copy.deepcopy(server.tolerations)
    if server.priority_class_name:
        spec["priorityClassName"] = server.priority_class_name
    if override.runtime_class_name:
        spec["runtimeClassName"] = override.runtime_class_name
    spec["securityContext"] = podsecurity.pod_security_context(md)
    affinity = _affinity(md)
    if affinity:
        spec["affinity"] = affinity
    if md.spec.placement.spread_across_zones:
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": ZONE_KEY,
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": names.selector(md)},
                # Count only pods of the same rollout revision.
                "matchLabelKeys": ["pod-template-hash"],
            }
        ]
    volumes = _volumes(md)
    if volumes:
        spec["volumes"] = volumes
    return {
        "metadata": {
            # The operator's own labels and annotations win over the override's.
            "labels": {**override.labels, **names.labels(md)},
            "annotations": {**override.annotations, **_annotations(md)},
        },
        "spec": spec,
    }


def serving_hash(md: ModelDeployment) -> str | None:
    """A short hash of `spec.serving` (None when unset: the pod template stays as before)."""
    if md.spec.serving is None or not any(
        value is not None for value in md.spec.serving.triton_config.values()
    ):
        return None
    text = json.dumps(md.spec.serving.triton_config, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _annotations(md: ModelDeployment) -> dict[str, str]:
    policy = serving_hash(md)
    extra = {SERVING_HASH_ANNOTATION: policy} if policy else {}
    return {**names.SCRAPE_ANNOTATIONS, **extra}


def triton_args(md: ModelDeployment) -> list[str]:
    """`tritonserver` arguments: the operator's, then the user's; a user flag replaces ours."""
    server = md.spec.server
    exit_timeout = max(1, server.termination_grace_period_seconds - server.drain_seconds - 5)
    ours = [
        ("--model-repository", md.spec.model.repository),
        ("--model-control-mode", "explicit"),
        ("--load-model", md.spec.model.name),
        ("--http-port", str(names.PORTS["http"])),
        ("--grpc-port", str(names.PORTS["grpc"])),
        ("--metrics-port", str(names.PORTS["metrics"])),
        ("--allow-metrics", "true"),
        ("--metrics-config", "summary_latencies=true"),
        ("--exit-timeout-secs", str(exit_timeout)),
        *control.triton_flags(),
    ]
    user_flags = {arg.split("=", 1)[0] for arg in server.args if arg.startswith("--")}
    if "--model-control-mode" in user_flags:
        user_flags.add("--load-model")  # the user decides what is loaded
    return [f"{flag}={value}" for flag, value in ours if flag not in user_flags] + list(server.args)


def container(md: ModelDeployment) -> dict[str, Any]:
    server = md.spec.server
    result: dict[str, Any] = {
        "name": CONTAINER,
        "image": server.image,
        "imagePullPolicy": server.image_pull_policy,
        "command": ["tritonserver"],
        "args": triton_args(md),
        "ports": [
            {"name": port_name, "containerPort": port, "protocol": "TCP"}
            for port_name, port in names.PORTS.items()
        ],
        "resources": _resources(md),
        "startupProbe": _probe(
            "/v2/health/ready",
            failure_threshold=math.ceil(server.startup_timeout_seconds / PROBE_PERIOD_SECONDS),
        ),
        "readinessProbe": _probe("/v2/health/ready", period=5, failure_threshold=3),
        "livenessProbe": _probe("/v2/health/live", failure_threshold=6),
    }
    # The control key first: `$(VAR)` in args expands only from variables defined earlier
    # in the list, and a user variable of the same name must not replace it.
    result["env"] = [control.env(md)] + [
        {
            key: value
            for key, value in (
                ("name", e.name),
                ("value", e.value),
                ("valueFrom", copy.deepcopy(e.value_from)),
            )
            if value is not None
        }
        for e in server.env
        if e.name != control.ENV
    ]
    if server.drain_seconds > 0:
        result["lifecycle"] = {"preStop": {"sleep": {"seconds": server.drain_seconds}}}
    mounts = _volume_mounts(md)
    if mounts:
        result["volumeMounts"] = mounts
    result["securityContext"] = podsecurity.container_security_context(md)
    return result


def _probe(path: str, *, failure_threshold: int, period: int = PROBE_PERIOD_SECONDS) -> Any:
    return {
        "httpGet": {"path": path, "port": "http"},
        "periodSeconds": period,
        "timeoutSeconds": 5,
        "failureThreshold": failure_threshold,
    }


def _resources(md: ModelDeployment) -> dict[str, Any]:
    server = md.spec.server
    result: dict[str, dict[str, Any]] = {}
    for kind, values in (
        ("requests", server.resources.requests),
        ("limits", server.resources.limits),
    ):
        quantities: dict[str, Any] = {}
        if values.cpu:
            quantities["cpu"] = values.cpu
        if values.memory:
            quantities["memory"] = values.memory
        if server.gpus > 0:
            # Extended resources: requests must equal limits.
            quantities[server.gpu_resource_name] = str(server.gpus)
        if quantities:
            result[kind] = quantities
    return result


def _affinity(md: ModelDeployment) -> dict[str, Any]:
    placement = md.spec.placement
    term = {
        "labelSelector": {"matchLabels": names.selector(md)},
        "topologyKey": placement.topology_key,
    }
    if placement.anti_affinity == "Required":
        return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    if placement.anti_affinity == "Preferred":
        return {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 100, "podAffinityTerm": term}
                ]
            }
        }
    return {}


def _volumes(md: ModelDeployment) -> list[dict[str, Any]]:
    server = md.spec.server
    volumes: list[dict[str, Any]] = []
    # A user volume named `dshm` replaces ours (two volumes of one name: the apiserver
    # refuses the Deployment), as a user arg replaces the operator's flag.
    if server.shm_size and not _user_has(md, "volumes", name="dshm"):
        volumes.append(
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": server.shm_size}}
        )
    if server.pod_template:
        volumes += copy.deepcopy(server.pod_template.volumes)
    return volumes


def _volume_mounts(md: ModelDeployment) -> list[dict[str, Any]]:
    server = md.spec.server
    mounts: list[dict[str, Any]] = []
    if server.shm_size and not _user_has(md, "volume_mounts", name="dshm", path="/dev/shm"):
        mounts.append({"name": "dshm", "mountPath": "/dev/shm"})
    if server.pod_template:
        mounts += copy.deepcopy(server.pod_template.volume_mounts)
    return mounts


def _user_has(md: ModelDeployment, field: str, *, name: str, path: str | None = None) -> bool:
    """The pod-template override already has a volume (mount) called `name` (at `path`)."""
    override = md.spec.server.pod_template
    items: list[dict[str, Any]] = getattr(override, field) if override else []
    return any(i.get("name") == name or (path and i.get("mountPath") == path) for i in items)
