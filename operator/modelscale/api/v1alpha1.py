"""The ModelDeployment API, group `modelscale.dev`, version `v1alpha1`.

These pydantic models are the single source of truth: the CRD's OpenAPI schema is
generated from them (`modelscale crd`, see `crd.py`), attribute docstrings become the
field descriptions `kubectl explain` shows, and the operator parses every object with
`ModelDeployment.model_validate(body)`.

Conventions:
- YAML/JSON field names are camelCase (`minReplicas`), Python attributes snake_case
  (`min_replicas`); both are accepted on input. Serialise with `to_api(...)` (camelCase,
  no `None` values).
- Every spec field has a default that works for a Triton server with the vLLM backend
  on one GPU, except `model.name` and `model.repository`.
- Cross-field rules live in `SPEC_RULES` as CEL (the apiserver rejects a bad spec at
  apply time with the message) and the same checks run in pydantic validators (so code
  that builds or parses a spec gets the same message).
- Replica bounds live at the top of the spec (`minReplicas`, `maxReplicas`, `replicas`),
  next to `replicas`, which the `/scale` subresource writes; `replicas` is honoured only in
  `External` scaling mode (then `kubectl scale`, an HPA or KEDA drive the ModelDeployment).
- Times in status are RFC 3339 strings (what users and `kubectl` read); use
  `to_rfc3339` / `from_rfc3339` to convert from / to the float Unix seconds the pure
  code works with.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

# The models live in base/scaling/warmup/status (a module each, to stay readable); they are
# re-exported here so every `from modelscale.api.v1alpha1 import X` keeps working.
from modelscale.api.base import (
    DNS_SUBDOMAIN_PATTERN,
    EXTENDED_RESOURCE_PATTERN,
    LABEL_VALUE_PATTERN,
    MSG_QUANTITY,
    QUALIFIED_NAME_PATTERN,
    QUANTITY_PATTERN,
    NotSerialisableError,
    Quantity,
    _Lenient,
    _Model,
    _sub,
    from_rfc3339,
    quantity_value,
    to_api,
    to_rfc3339,
)
from modelscale.api.scaling import (
    MSG_FLOOR,
    Forecast,
    LatencySignal,
    LatencySLO,
    MissingMetricsBehavior,
    OnMissingMetrics,
    Prometheus,
    PromQueries,
    ScaleDown,
    ScaleUp,
    Scaling,
    ScalingMode,
    Seasonality,
    Targets,
)
from modelscale.api.serving import (
    MSG_CONTINUOUS_BATCHING,
    MSG_DEFAULT_LEVEL,
    MSG_QUEUE_LEVEL,
    SERVING_RULES,
    CircuitBreaker,
    DynamicBatching,
    LevelQueuePolicy,
    Priorities,
    QueuePolicy,
    Serving,
    TimeoutAction,
    check_backend,
)
from modelscale.api.status import (
    AutoscalingStatus,
    Condition,
    ConditionStatus,
    ModelDeploymentStatus,
    ScalingDecision,
    WarmUpStatus,
)
from modelscale.api.warmup import (
    MSG_STABLE_N,
    MSG_WARMUP_INPUTS,
    InferInput,
    WarmUp,
    WarmUpProtocol,
    WarmUpRequest,
    WarmUpSuccess,
)

__all__ = [
    "API_VERSION",
    "CATEGORIES",
    "DNS_SUBDOMAIN_PATTERN",
    "ENV_NAME_PATTERN",
    "EXTENDED_RESOURCE_PATTERN",
    "GROUP",
    "KIND",
    "LABEL_VALUE_PATTERN",
    "MAX_NAME_LENGTH",
    "MSG_CONTINUOUS_BATCHING",
    "MSG_DEFAULT_LEVEL",
    "MSG_DRAIN",
    "MSG_ENV_VALUE",
    "MSG_FLOOR",
    "MSG_LABEL_KEYS",
    "MSG_MAX_UNAVAILABLE",
    "MSG_MIN_MAX",
    "MSG_NAME_LENGTH",
    "MSG_QUANTITY",
    "MSG_QUEUE_LEVEL",
    "MSG_REPLICAS_BOUNDS",
    "MSG_REQUESTS_OVER_LIMITS",
    "MSG_SCALE_TO_ZERO",
    "MSG_STABLE_N",
    "MSG_WARMUP_INPUTS",
    "PLURAL",
    "QUALIFIED_NAME_PATTERN",
    "QUANTITY_PATTERN",
    "SHM_SIZE_PATTERN",
    "SHORT_NAMES",
    "SINGULAR",
    "VERSION",
    "WARMED_UP_CONDITION",
    "AntiAffinity",
    "AutoscalingStatus",
    "Backend",
    "CircuitBreaker",
    "Condition",
    "ConditionStatus",
    "Disruption",
    "DynamicBatching",
    "EnvVar",
    "Forecast",
    "InferInput",
    "LatencySLO",
    "LatencySignal",
    "LevelQueuePolicy",
    "MissingMetricsBehavior",
    "ModelDeployment",
    "ModelDeploymentSpec",
    "ModelDeploymentStatus",
    "ModelSource",
    "NotSerialisableError",
    "ObjectMeta",
    "OnMissingMetrics",
    "Placement",
    "PodTemplateOverride",
    "Priorities",
    "PromQueries",
    "Prometheus",
    "PullPolicy",
    "Quantity",
    "QueuePolicy",
    "ResourceList",
    "Resources",
    "ScaleDown",
    "ScaleUp",
    "Scaling",
    "ScalingDecision",
    "ScalingMode",
    "Seasonality",
    "Server",
    "Serving",
    "Targets",
    "TimeoutAction",
    "WarmUp",
    "WarmUpProtocol",
    "WarmUpRequest",
    "WarmUpStatus",
    "WarmUpSuccess",
    "from_rfc3339",
    "to_api",
    "to_rfc3339",
]

GROUP = "modelscale.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "ModelDeployment"
PLURAL = "modeldeployments"
SINGULAR = "modeldeployment"
SHORT_NAMES = ("mdep",)
CATEGORIES = ("modelscale", "ai")

# The pod readiness gate the operator sets True once a pod has been warmed up.
WARMED_UP_CONDITION = "modelscale.dev/warmed-up"

Backend = Literal["vllm", "tensorrtllm", "python", "onnxruntime", "other"]
AntiAffinity = Literal["Preferred", "Required", "None"]
PullPolicy = Literal["Always", "IfNotPresent", "Never"]

_PERCENT = re.compile(r"^(100|[1-9]?[0-9])%$")


# --------------------------------------------------------------------------- metadata


class ObjectMeta(_Lenient):
    """The part of Kubernetes object metadata the operator reads."""

    name: str = ""
    namespace: str = "default"
    uid: str = ""
    generation: int = 0
    resource_version: str = ""
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


# --------------------------------------------------------------------------- model


class ModelSource(_Model):
    """Which model Triton serves and where it comes from."""

    name: str = Field(min_length=1, max_length=253)
    """Triton model name (the directory name in the repository); the server loads only this
    model (`--model-control-mode=explicit --load-model=NAME`)."""
    repository: str = Field(min_length=1, max_length=2048)
    """Triton model repository: a path inside the image or a volume, or an `s3://`, `gs://`
    or `as://` URI (`--model-repository`)."""
    backend: Backend = "vllm"
    """Triton backend of the model; picks the metric presets the autoscaler reads."""


# --------------------------------------------------------------------------- server


ENV_NAME_PATTERN = r"^[ -<>-~]+$"
LabelValue = Annotated[str, Field(max_length=63, pattern=LABEL_VALUE_PATTERN)]
"""A label value as Kubernetes accepts it (node selectors, pod labels)."""
MAX_LABELS = 64
MAX_NAME_LENGTH = 63

MSG_ENV_VALUE = "server.env: an entry sets value or valueFrom, not both"
MSG_LABEL_KEYS = (
    "label and annotation keys must be qualified names: NAME or PREFIX/NAME, NAME up to 63 "
    "letters, digits, '-', '_' or '.' starting and ending with a letter or digit, PREFIX a "
    "DNS subdomain (e.g. example.com/tier)"
)
MSG_REQUESTS_OVER_LIMITS = "server.resources: requests must not exceed limits (cpu and memory each)"
MSG_NAME_LENGTH = (
    f"metadata.name must be at most {MAX_NAME_LENGTH} characters: it is the value of the "
    "pod label modelscale.dev/modeldeployment, and label values stop at 63"
)
MSG_SCALE_TO_ZERO = (
    "minReplicas: 0 needs scaling.mode: External: with no pod serving, the Predictive "
    "autoscaler sees no demand and would stay at 0; drive scale to zero with KEDA (its "
    "activation brings the first pod back), or set minReplicas >= 1"
)


def _bad_keys(keys: list[str]) -> bool:
    return any(not _QUALIFIED_NAME.match(k) or len(k) > 316 for k in keys)


_QUALIFIED_NAME = re.compile(QUALIFIED_NAME_PATTERN)


class EnvVar(_Model):
    """An environment variable of the Triton container."""

    name: str = Field(min_length=1, max_length=253, pattern=ENV_NAME_PATTERN)
    """Variable name: printable ASCII without `=` (what Kubernetes accepts)."""
    value: str | None = None
    """Literal value; leave out when `valueFrom` is set."""
    value_from: dict[str, Any] | None = None
    """A Kubernetes `EnvVarSource` (secretKeyRef, configMapKeyRef, fieldRef, ...), passed
    through unchanged."""

    @model_validator(mode="after")
    def _check(self) -> EnvVar:
        if self.value is not None and self.value_from is not None:
            raise ValueError(MSG_ENV_VALUE)
        return self


class ResourceList(_Model):
    """CPU and memory quantities, e.g. `cpu: 4`, `cpu: 500m`, `memory: 32Gi`."""

    cpu: Quantity | None = None
    """CPU cores: an integer (`4`) or a quantity string (`"500m"`, `"1.5"`)."""
    memory: Quantity | None = None
    """Memory: a quantity such as `32Gi` or `512Mi` (plain integers are bytes)."""


class Resources(_Model):
    """CPU and memory of the Triton container. GPUs are set with `server.gpus`."""

    requests: ResourceList = _sub(ResourceList)
    limits: ResourceList = _sub(ResourceList)

    @model_validator(mode="after")
    def _check(self) -> Resources:
        for request, limit in (
            (self.requests.cpu, self.limits.cpu),
            (self.requests.memory, self.limits.memory),
        ):
            if request and limit and quantity_value(request) > quantity_value(limit):
                raise ValueError(MSG_REQUESTS_OVER_LIMITS)
        return self


class PodTemplateOverride(_Model):
    """A narrow override of the Triton pod for what the typed fields lack. Allowed: extra pod
    labels and annotations (the operator's own labels and annotations win), extra volumes
    and volume mounts of the Triton container, the pod and container security contexts,
    and the runtime class. Anything else (probes, ports, command, affinity) is owned by the
    operator."""

    labels: dict[str, LabelValue] = Field(default_factory=dict, max_length=MAX_LABELS)
    """Extra pod labels; the operator's own labels win on a clash."""
    annotations: dict[str, str] = Field(default_factory=dict, max_length=MAX_LABELS)
    """Extra pod annotations; the operator's own annotations win on a clash."""
    volumes: list[dict[str, Any]] = Field(default_factory=list)
    """Extra pod volumes (Kubernetes `Volume` objects), e.g. a PVC holding the models. Only
    the types Pod Security `restricted` allows (configMap, csi, downwardAPI, emptyDir,
    ephemeral, image, persistentVolumeClaim, projected, secret), unless the operator is
    installed with `podSecurity.allowPrivileged`."""
    volume_mounts: list[dict[str, Any]] = Field(default_factory=list)
    """Extra volume mounts (Kubernetes `VolumeMount` objects) of the Triton container."""
    security_context: dict[str, Any] | None = None
    """Pod `securityContext`; its keys replace the operator's defaults (`runAsNonRoot`,
    `runAsUser`/`runAsGroup`/`fsGroup` 1000, seccomp `RuntimeDefault`). What Pod Security
    `restricted` forbids (root, unconfined seccomp, unsafe sysctls) is refused unless the
    operator is installed with `podSecurity.allowPrivileged`."""
    container_security_context: dict[str, Any] | None = None
    """Triton container `securityContext`; its keys replace the operator's defaults
    (`allowPrivilegeEscalation: false`, `capabilities: {drop: [ALL]}`). Privileged, added
    capabilities other than NET_BIND_SERVICE, escalation or root are refused unless the
    operator is installed with `podSecurity.allowPrivileged`."""
    runtime_class_name: str | None = Field(
        default=None, max_length=253, pattern=DNS_SUBDOMAIN_PATTERN
    )
    """Pod `runtimeClassName`, e.g. `nvidia` where the GPU runtime is not the default."""


# Empty (keep the container default) or a quantity.
SHM_SIZE_PATTERN = f"^$|{QUANTITY_PATTERN}"


class Server(_Model):
    """The Triton server pods."""

    image: str = Field(
        default="nvcr.io/nvidia/tritonserver:24.10-vllm-python-py3",
        min_length=1,
        pattern=r"^\S(.*\S)?$",
    )
    """Container image that provides `tritonserver` and the model's backend."""
    image_pull_policy: PullPolicy = "IfNotPresent"
    """Container `imagePullPolicy`: `Always`, `IfNotPresent` or `Never`."""
    image_pull_secrets: list[
        Annotated[str, Field(pattern=DNS_SUBDOMAIN_PATTERN, max_length=253)]
    ] = Field(default_factory=list)
    """Names of Secrets used to pull the image."""
    args: list[str] = Field(default_factory=list)
    """Extra `tritonserver` arguments, appended after the operator's own."""
    env: list[EnvVar] = Field(
        default_factory=list,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    """Environment variables of the Triton container, by name."""
    gpus: int = Field(default=1, ge=0, le=64, strict=True)
    """GPUs per replica (requests and limits of `gpuResourceName`); 0 runs on CPU."""
    gpu_resource_name: str = Field(
        default="nvidia.com/gpu", max_length=253, pattern=EXTENDED_RESOURCE_PATTERN
    )
    """Extended resource that represents a GPU on the nodes (`DOMAIN/NAME`, e.g.
    `nvidia.com/gpu`, `amd.com/gpu`)."""
    resources: Resources = _sub(Resources)
    node_selector: dict[str, LabelValue] = Field(default_factory=dict, max_length=MAX_LABELS)
    """Pod `nodeSelector`: run only on nodes with these labels (e.g. a GPU model)."""
    tolerations: list[dict[str, Any]] = Field(default_factory=list)
    """Kubernetes `Toleration` objects, passed through unchanged."""
    priority_class_name: str | None = Field(
        default=None, max_length=253, pattern=DNS_SUBDOMAIN_PATTERN
    )
    """Pod `priorityClassName`."""
    service_account_name: str | None = Field(
        default=None, max_length=253, pattern=DNS_SUBDOMAIN_PATTERN
    )
    """ServiceAccount of the pods (e.g. one with cloud credentials for an `s3://`
    repository); unset: the namespace's `default`."""
    shm_size: str | None = Field(default="1Gi", max_length=64, pattern=SHM_SIZE_PATTERN)
    """Size of the memory-backed `/dev/shm` (Triton's Python backend and vLLM exchange
    tensors through shared memory; the container default of 64 MiB is too small). Empty or
    null keeps the container default."""
    startup_timeout_seconds: int = Field(default=1800, ge=10, le=86400)
    """How long a pod may take to download and load the model before it is restarted."""
    drain_seconds: int = Field(default=10, ge=0, le=3600)
    """On termination, keep serving this long (preStop) so endpoints drop the pod first."""
    termination_grace_period_seconds: int = Field(default=60, ge=1, le=86400)
    """Total time a terminating pod gets (drain plus Triton finishing in-flight requests)."""
    pod_template: PodTemplateOverride | None = None
    """A narrow override of the pod for what the typed fields lack (labels, annotations,
    volumes, security contexts, runtime class)."""

    @model_validator(mode="after")
    def _check(self) -> Server:
        if self.drain_seconds >= self.termination_grace_period_seconds:
            raise ValueError(MSG_DRAIN)
        override = self.pod_template
        if _bad_keys(list(self.node_selector)) or (
            override is not None and _bad_keys([*override.labels, *override.annotations])
        ):
            raise ValueError(MSG_LABEL_KEYS)
        return self


# --------------------------------------------------------------------------- placement


class Placement(_Model):
    """Where replicas run relative to each other."""

    anti_affinity: AntiAffinity = "Preferred"
    """Keep replicas apart on `topologyKey`: `Required` (a replica stays Pending rather than
    share a node), `Preferred` (best effort) or `None`."""
    topology_key: str = Field(
        default="kubernetes.io/hostname", max_length=316, pattern=QUALIFIED_NAME_PATTERN
    )
    """Node label key that defines "apart" for `antiAffinity` (a node by default; a zone
    with `topology.kubernetes.io/zone`)."""
    spread_across_zones: bool = True
    """Spread replicas evenly over `topology.kubernetes.io/zone` (best effort:
    `whenUnsatisfiable: ScheduleAnyway`)."""


# --------------------------------------------------------------------------- disruption


class Disruption(_Model):
    """The PodDisruptionBudget of the replicas."""

    max_unavailable: int | str = Field(default=1, json_schema_extra={"x-int-or-string": True})
    """Replicas that voluntary disruptions (drains) may take down at once: a number or a
    percentage such as `25%`."""

    @model_validator(mode="after")
    def _check(self) -> Disruption:
        value = self.max_unavailable
        if isinstance(value, int) and value < 0:
            raise ValueError(MSG_MAX_UNAVAILABLE)
        if isinstance(value, str) and not _PERCENT.match(value):
            raise ValueError(MSG_MAX_UNAVAILABLE)
        return self


# --------------------------------------------------------------------------- spec

MSG_MIN_MAX = "minReplicas must be less than or equal to maxReplicas"
MSG_REPLICAS_BOUNDS = "replicas must be between minReplicas and maxReplicas"
MSG_DRAIN = "server.drainSeconds must be less than server.terminationGracePeriodSeconds"
MSG_MAX_UNAVAILABLE = "disruption.maxUnavailable must be a non-negative integer or a percentage"

# (path below spec or "" for spec itself, CEL rule, message). The schema's own keywords
# (minimum, enum, exclusiveMinimum) already give readable messages for single fields
# ("spec.server.gpus: Invalid value: -1: should be greater than or equal to 0",
# "Unsupported value: ...: supported values: ..."); these are the cross-field rules.
SPEC_RULES: tuple[tuple[str, str, str], ...] = (
    ("", "self.minReplicas <= self.maxReplicas", MSG_MIN_MAX),
    (
        "",
        "!has(self.replicas) || (self.replicas >= self.minReplicas"
        " && self.replicas <= self.maxReplicas)",
        MSG_REPLICAS_BOUNDS,
    ),
    ("server", "self.drainSeconds < self.terminationGracePeriodSeconds", MSG_DRAIN),
    (
        "scaling.onMissingMetrics",
        "self.behavior != 'Floor' || has(self.floorReplicas)",
        MSG_FLOOR,
    ),
    (
        "warmUp",
        "!self.enabled || self.autoGenerate || (has(self.requests) && size(self.requests) > 0)",
        MSG_WARMUP_INPUTS,
    ),
    ("warmUp", "self.success.stableLastN <= self.count", MSG_STABLE_N),
    (
        "disruption.maxUnavailable",
        "type(self) == int ? self >= 0 : self.matches('^(100|[1-9]?[0-9])%$')",
        MSG_MAX_UNAVAILABLE,
    ),
    *SERVING_RULES,
    ("", "self.minReplicas > 0 || self.scaling.mode != 'Predictive'", MSG_SCALE_TO_ZERO),
    ("server.env[]", "!(has(self.value) && has(self.valueFrom))", MSG_ENV_VALUE),
    (
        "server.resources",
        " && ".join(
            f"(!has(self.requests.{r}) || !has(self.limits.{r}) || "
            f"quantity(string(self.requests.{r})).compareTo("
            f"quantity(string(self.limits.{r}))) <= 0)"
            for r in ("cpu", "memory")
        ),
        MSG_REQUESTS_OVER_LIMITS,
    ),
    *(
        (
            path,
            f"self.all(k, size(k) <= 316 && k.matches(r'{QUALIFIED_NAME_PATTERN}'))",
            MSG_LABEL_KEYS,
        )
        for path in (
            "server.nodeSelector",
            "server.podTemplate.labels",
            "server.podTemplate.annotations",
        )
    ),
)

# Rules on the whole object (CEL may read metadata.name there).
OBJECT_RULES: tuple[tuple[str, str], ...] = (
    (f"size(self.metadata.name) <= {MAX_NAME_LENGTH}", MSG_NAME_LENGTH),
)


class ModelDeploymentSpec(_Model):
    """What the user wants: a model served by Triton, scaled ahead of demand."""

    model: ModelSource
    server: Server = _sub(Server)
    placement: Placement = _sub(Placement)
    replicas: int | None = Field(default=None, ge=0)
    """Replicas wanted in `External` scaling mode (written by `kubectl scale`, an HPA or
    KEDA through the `/scale` subresource). Ignored in the other modes: the operator never
    writes it."""
    min_replicas: int = Field(default=1, ge=0, le=10000)
    """Fewest replicas, whatever the load."""
    max_replicas: int = Field(default=10, ge=1, le=10000)
    """Most replicas, whatever the load: the GPU budget of this model."""
    scaling: Scaling = _sub(Scaling)
    warm_up: WarmUp = _sub(WarmUp)
    disruption: Disruption = _sub(Disruption)
    serving: Serving | None = None
    """How Triton batches, prioritises and sheds requests inside each pod (delivered at model
    load, before the warm-up; docs/serving.md). Unset: the model's repository config."""

    @model_validator(mode="after")
    def _check(self) -> ModelDeploymentSpec:
        check_backend(self.serving, backend=self.model.backend)
        if self.min_replicas > self.max_replicas:
            raise ValueError(MSG_MIN_MAX)
        if self.min_replicas == 0 and self.scaling.mode == "Predictive":
            raise ValueError(MSG_SCALE_TO_ZERO)
        if self.replicas is not None and not (
            self.min_replicas <= self.replicas <= self.max_replicas
        ):
            raise ValueError(MSG_REPLICAS_BOUNDS)
        return self


# --------------------------------------------------------------------------- object


class ModelDeployment(_Lenient):
    """A model served by NVIDIA Triton Inference Server and scaled ahead of demand."""

    api_version: str = API_VERSION
    kind: str = KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ModelDeploymentSpec
    status: ModelDeploymentStatus | None = None

    @model_validator(mode="after")
    def _check(self) -> ModelDeployment:
        if len(self.metadata.name) > MAX_NAME_LENGTH:
            raise ValueError(MSG_NAME_LENGTH)
        return self

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str:
        return self.metadata.namespace
