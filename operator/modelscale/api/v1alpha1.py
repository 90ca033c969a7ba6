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

import math
import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema, model_validator
from pydantic.alias_generators import to_camel

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
ScalingMode = Literal["Predictive", "RecommendOnly", "External"]
LatencySignal = Literal["TimeToFirstToken", "TimePerOutputToken", "EndToEnd"]
AntiAffinity = Literal["Preferred", "Required", "None"]
Seasonality = Literal["Auto", "None", "Daily"]
MissingMetricsBehavior = Literal["Hold", "Floor"]
WarmUpProtocol = Literal["HTTP", "GRPC"]
PullPolicy = Literal["Always", "IfNotPresent", "Never"]
ConditionStatus = Literal["True", "False", "Unknown"]

_PERCENT = re.compile(r"^(100|[1-9]?[0-9])%$")

# Kubernetes' quantity grammar (k8s.io/apimachinery/pkg/api/resource), as the pattern
# controller-gen writes for `resource.Quantity`: a signed decimal number, then a binary
# suffix (Ki .. Ei), a decimal suffix (n u m k M G T P E) or an exponent (e3, E-2).
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
_QUANTITY = re.compile(QUANTITY_PATTERN)
MSG_QUANTITY = (
    'must be a Kubernetes quantity: an integer such as 4 or a string such as "500m", '
    '"1.5" or "32Gi"'
)


def _quantity(value: object) -> str:
    """Accept what Kubernetes accepts for a CPU or memory quantity in a CRD field (an integer
    or a quantity string) and keep one shape, the string, for the rest of the code."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        # Floats too: `cpu: 0.5` is no int-or-string, the apiserver would refuse it.
        raise ValueError(MSG_QUANTITY)
    text = str(value)
    if not _QUANTITY.match(text):
        raise ValueError(MSG_QUANTITY)
    return text


Quantity = Annotated[
    str,
    BeforeValidator(_quantity),
    WithJsonSchema({"x-kubernetes-int-or-string": True, "pattern": QUANTITY_PATTERN}),
]
"""A Kubernetes quantity, int-or-string on the wire (`4`, `"500m"`, `32Gi`), a `str` here."""


class _Model(BaseModel):
    """Base for spec models: camelCase aliases, unknown fields rejected."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        use_attribute_docstrings=True,
        extra="forbid",
        frozen=True,
    )


class _Lenient(BaseModel):
    """Base for metadata and status models: unknown fields are ignored (other writers)."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        use_attribute_docstrings=True,
        extra="ignore",
        frozen=True,
    )


def _sub(cls: type[BaseModel]) -> Any:
    """A nested block with defaults. `default: {}` in the CRD makes the apiserver fill the
    block's own defaults in when the user omits it (kubebuilder's `default={}` idiom)."""
    return Field(default_factory=cls, json_schema_extra={"default": {}})


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


class EnvVar(_Model):
    """An environment variable of the Triton container."""

    name: str = Field(min_length=1, max_length=253)
    """Variable name."""
    value: str | None = None
    """Literal value; leave out when `valueFrom` is set."""
    value_from: dict[str, Any] | None = None
    """A Kubernetes `EnvVarSource` (secretKeyRef, configMapKeyRef, fieldRef, ...), passed
    through unchanged."""


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


class PodTemplateOverride(_Model):
    """A narrow override of the Triton pod for what the typed fields lack. Allowed: extra pod
    labels and annotations (the operator's own labels and annotations win), extra volumes
    and volume mounts of the Triton container, the pod and container security contexts,
    and the runtime class. Anything else (probes, ports, command, affinity) is owned by the
    operator."""

    labels: dict[str, str] = Field(default_factory=dict)
    """Extra pod labels; the operator's own labels win on a clash."""
    annotations: dict[str, str] = Field(default_factory=dict)
    """Extra pod annotations; the operator's own annotations win on a clash."""
    volumes: list[dict[str, Any]] = Field(default_factory=list)
    """Extra pod volumes (Kubernetes `Volume` objects), e.g. a PVC holding the models."""
    volume_mounts: list[dict[str, Any]] = Field(default_factory=list)
    """Extra volume mounts (Kubernetes `VolumeMount` objects) of the Triton container."""
    security_context: dict[str, Any] | None = None
    """Pod `securityContext`."""
    container_security_context: dict[str, Any] | None = None
    """Triton container `securityContext`."""
    runtime_class_name: str | None = None
    """Pod `runtimeClassName`, e.g. `nvidia` where the GPU runtime is not the default."""


class Server(_Model):
    """The Triton server pods."""

    image: str = Field(default="nvcr.io/nvidia/tritonserver:24.10-vllm-python-py3", min_length=1)
    """Container image that provides `tritonserver` and the model's backend."""
    image_pull_policy: PullPolicy = "IfNotPresent"
    """Container `imagePullPolicy`: `Always`, `IfNotPresent` or `Never`."""
    image_pull_secrets: list[str] = Field(default_factory=list)
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
    gpu_resource_name: str = Field(default="nvidia.com/gpu", min_length=1, max_length=253)
    """Extended resource that represents a GPU on the nodes."""
    resources: Resources = _sub(Resources)
    node_selector: dict[str, str] = Field(default_factory=dict)
    """Pod `nodeSelector`: run only on nodes with these labels (e.g. a GPU model)."""
    tolerations: list[dict[str, Any]] = Field(default_factory=list)
    """Kubernetes `Toleration` objects, passed through unchanged."""
    priority_class_name: str | None = None
    """Pod `priorityClassName`."""
    service_account_name: str | None = None
    """ServiceAccount of the pods (e.g. one with cloud credentials for an `s3://`
    repository); unset: the namespace's `default`."""
    shm_size: str | None = Field(default="1Gi", max_length=64)
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
        return self


# --------------------------------------------------------------------------- placement


class Placement(_Model):
    """Where replicas run relative to each other."""

    anti_affinity: AntiAffinity = "Preferred"
    """Keep replicas apart on `topologyKey`: `Required` (a replica stays Pending rather than
    share a node), `Preferred` (best effort) or `None`."""
    topology_key: str = Field(default="kubernetes.io/hostname", min_length=1, max_length=316)
    """Node label that defines "apart" for `antiAffinity` (a node by default; a zone with
    `topology.kubernetes.io/zone`)."""
    spread_across_zones: bool = True
    """Spread replicas evenly over `topology.kubernetes.io/zone` (best effort:
    `whenUnsatisfiable: ScheduleAnyway`)."""


# --------------------------------------------------------------------------- scaling


class LatencySLO(_Model):
    """The latency objective the autoscaler keeps."""

    signal: LatencySignal = "TimeToFirstToken"
    """Which latency: time to first token, time per output token, or end-to-end request."""
    p99_seconds: float = Field(default=2.0, gt=0)
    """P99 of `signal` must stay at or below this many seconds."""


class Targets(_Model):
    """What one replica can do while meeting the SLO."""

    tokens_per_second_per_replica: float = Field(default=500.0, gt=0)
    """Output tokens/s one warmed replica sustains at the SLO. Default: Llama-3.1-8B with
    vLLM on one A100 with 8 concurrent streams (about 75 tokens/s x 6.6)."""
    latency_slo: LatencySLO = Field(
        default_factory=LatencySLO,
        alias="latencySLO",
        json_schema_extra={"default": {}},
    )
    headroom: float = Field(default=0.8, gt=0, le=1)
    """Plan for at most this share of the capacity (0 < headroom <= 1)."""
    time_per_output_token_p99_seconds: float | None = Field(default=None, gt=0)
    """Optional second SLO: P99 time per output token (vLLM backend). A long-prompt burst can
    break it while time to first token still looks fine; when set, the autoscaler also
    scales up on it and does not scale down while it is near the limit."""


class Forecast(_Model):
    """How far ahead and from what history the autoscaler forecasts."""

    horizon_seconds: float = Field(default=120.0, gt=0, le=3600)
    """Forecast horizon used until the operator has measured how long its new pods take to
    serve (creation to warmed); then the measurement is used."""
    use_measured_horizon: bool = True
    """Replace `horizonSeconds` by the measured pod start-up time once known."""
    lookback_seconds: float = Field(default=3600.0, gt=0, le=30 * 86400)
    """History the forecaster fits on."""
    seasonality: Seasonality = "Auto"
    """Daily seasonality: detect it (`Auto`), assume it (`Daily`) or ignore it (`None`)."""


class ScaleUp(_Model):
    """Limits on scaling up."""

    stabilization_window_seconds: float = Field(default=0.0, ge=0, le=3600)
    """Scale up to the lowest recommendation of this window (0: act at once)."""
    max_step: int = Field(default=100, ge=1)
    """At most this many replicas added per decision."""


class ScaleDown(_Model):
    """Limits on scaling down."""

    stabilization_window_seconds: float = Field(default=300.0, ge=0, le=86400)
    """Scale down only to the highest recommendation of this window."""
    max_step: int = Field(default=1, ge=1)
    """At most this many replicas removed per decision."""


class PromQueries(_Model):
    """PromQL overrides, one per signal. Each query must return one series per
    ModelDeployment labelled `modeldeployment` and `namespace`; unset signals use the
    preset of `model.backend`."""

    token_rate: str | None = None
    """Output tokens/s."""
    prompt_token_rate: str | None = None
    """Prompt (input) tokens/s."""
    request_rate: str | None = None
    """Requests/s."""
    latency_p99: str | None = None
    """P99 of the SLO's latency signal, in seconds."""
    queue_depth: str | None = None
    """Requests waiting."""


class Prometheus(_Model):
    """Where metrics come from."""

    url: str | None = None
    """Prometheus base URL; overrides the operator's `--prometheus-url`."""
    timeout_seconds: float = Field(default=5.0, gt=0, le=300)
    """Timeout of each Prometheus query; a query that times out counts as missing metrics."""
    queries: PromQueries = _sub(PromQueries)


class OnMissingMetrics(_Model):
    """What the autoscaler does when metrics are missing or stale. It never scales down
    because of missing metrics."""

    behavior: MissingMetricsBehavior = "Hold"
    """`Hold` keeps the current replicas; `Floor` scales to at least `floorReplicas`."""
    floor_replicas: int | None = Field(default=None, ge=0)
    """With `behavior: Floor`: scale up to at least this many replicas while metrics are
    missing (required then)."""
    stale_after_seconds: float = Field(default=60.0, gt=0, le=3600)
    """A newest sample older than this counts as missing."""

    @model_validator(mode="after")
    def _check(self) -> OnMissingMetrics:
        if self.behavior == "Floor" and self.floor_replicas is None:
            raise ValueError(MSG_FLOOR)
        return self


class Scaling(_Model):
    """How the number of replicas is decided."""

    mode: ScalingMode = "Predictive"
    """`Predictive`: the operator scales ahead of demand. `RecommendOnly`: it computes and
    reports a recommendation in status but does not act. `External`: `spec.replicas` (the
    `/scale` subresource: kubectl scale, HPA, KEDA) decides."""
    targets: Targets = _sub(Targets)
    forecast: Forecast = _sub(Forecast)
    scale_up: ScaleUp = _sub(ScaleUp)
    scale_down: ScaleDown = _sub(ScaleDown)
    prometheus: Prometheus = _sub(Prometheus)
    on_missing_metrics: OnMissingMetrics = _sub(OnMissingMetrics)


# --------------------------------------------------------------------------- warm-up


class InferInput(_Model):
    """One input tensor of a warm-up request."""

    datatype: str = Field(min_length=1, max_length=16)
    """Triton datatype: BYTES, FP32, INT32, BOOL, ..."""
    shape: list[int] = Field(min_length=0, max_length=8)
    """Tensor shape, e.g. `[1, 1]`."""
    data: list[Any]
    """Values, flattened or nested; strings for BYTES."""


class WarmUpRequest(_Model):
    """An explicit warm-up inference request."""

    inputs: dict[str, InferInput]
    """Input tensors by name."""
    outputs: list[str] = Field(default_factory=list)
    """Outputs to request (empty: all)."""
    parameters: dict[str, Any] = Field(default_factory=dict)
    """Request parameters, e.g. `{"max_tokens": 64}` for the vLLM backend."""


class WarmUpSuccess(_Model):
    """When a pod counts as warm."""

    stable_last_n: int = Field(default=3, ge=1)
    """The last N requests must all succeed and be within `maxLatencyFactor`."""
    max_latency_factor: float = Field(default=1.5, ge=1)
    """... of the median latency of those last N requests (the model stopped getting
    faster)."""


class WarmUp(_Model):
    """Warm every new pod with real inference requests before it gets traffic (pod
    readiness gate `modelscale.dev/warmed-up`)."""

    enabled: bool = True
    """Warm pods up before they get traffic. false: a pod is Ready as soon as Triton is."""
    protocol: WarmUpProtocol = "GRPC"
    """gRPC also serves decoupled (streaming) models such as the vLLM backend's."""
    requests: list[WarmUpRequest] = Field(default_factory=list)
    """Explicit requests, sent round-robin. Empty: generated from the model's metadata when
    `autoGenerate` is true."""
    auto_generate: bool = True
    """Without explicit `requests`, build requests from the model's metadata (input names,
    datatypes, shapes)."""
    count: int = Field(default=8, ge=1, le=10000)
    """Requests sent per pod at least; up to 4 x count while latencies are still falling."""
    concurrency: int = Field(default=2, ge=1, le=1024)
    """Warm-up requests in flight at once per pod."""
    timeout_seconds: float = Field(default=60.0, gt=0, le=3600)
    """Per request; also bounds the wait for the server and the model to be ready."""
    max_attempts: int = Field(default=3, ge=1, le=100)
    """Warm-up rounds before the pod is reported as failing warm-up."""
    success: WarmUpSuccess = _sub(WarmUpSuccess)

    @model_validator(mode="after")
    def _check(self) -> WarmUp:
        if self.enabled and not self.requests and not self.auto_generate:
            raise ValueError(MSG_WARMUP_INPUTS)
        if self.success.stable_last_n > self.count:
            raise ValueError(MSG_STABLE_N)
        return self


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
MSG_FLOOR = "scaling.onMissingMetrics.floorReplicas is required when behavior is Floor"
MSG_WARMUP_INPUTS = "warmUp needs explicit requests or autoGenerate: true when enabled"
MSG_STABLE_N = "warmUp.success.stableLastN must not exceed warmUp.count"
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

    @model_validator(mode="after")
    def _check(self) -> ModelDeploymentSpec:
        if self.min_replicas > self.max_replicas:
            raise ValueError(MSG_MIN_MAX)
        if self.replicas is not None and not (
            self.min_replicas <= self.replicas <= self.max_replicas
        ):
            raise ValueError(MSG_REPLICAS_BOUNDS)
        return self


# --------------------------------------------------------------------------- status


class Condition(_Lenient):
    """A Kubernetes-style condition: Available, Progressing, Degraded, ..."""

    type: str
    status: ConditionStatus
    reason: str = ""
    """CamelCase reason, e.g. `MinimumReplicasWarmed`."""
    message: str = ""
    last_transition_time: str | None = Field(
        default=None, json_schema_extra={"format": "date-time"}
    )
    """Changes only when `status` changes."""
    observed_generation: int | None = None


class ScalingDecision(_Lenient):
    """One past autoscaler decision."""

    time: str = Field(json_schema_extra={"format": "date-time"})
    replicas: int
    reason: str


class AutoscalingStatus(_Lenient):
    """What the autoscaler saw, predicted and decided last."""

    current_token_rate: float | None = None
    """Output tokens/s now, summed over the replicas."""
    predicted_token_rate: float | None = None
    """Forecast output tokens/s at `now + horizonSeconds`."""
    current_p99_seconds: float | None = None
    predicted_p99_seconds: float | None = None
    horizon_seconds: float | None = None
    """The horizon in use: measured pod start-up time, or `spec...forecast.horizonSeconds`."""
    recommended_replicas: int | None = None
    """What the policy recommends now (also in RecommendOnly mode)."""
    reason: str | None = None
    message: str | None = None
    last_scale_time: str | None = Field(default=None, json_schema_extra={"format": "date-time"})
    decisions: list[ScalingDecision] = Field(default_factory=list, max_length=10)
    """The last 10 decisions, oldest first."""
    state: dict[str, Any] = Field(default_factory=dict)
    """The policy's learned parameters (forecaster and capacity model), so a restarted
    operator continues where it stopped. Free-form, owned by the autoscaler."""


class WarmUpStatus(_Lenient):
    """Measured pod start-up of this ModelDeployment's recent pods."""

    median_seconds_to_ready: float | None = None
    """Pod creation to Triton ready (scheduling, image pull, model load)."""
    median_seconds_to_warm: float | None = None
    """Pod creation to warmed (ready plus warm-up): the autoscaler's horizon."""
    samples: int = 0


class ModelDeploymentStatus(_Lenient):
    """What the operator observed. Written by the operator only."""

    observed_generation: int | None = None
    replicas: int | None = None
    """Pods of the current Deployment (for the `/scale` subresource)."""
    ready_replicas: int | None = None
    """Pods that are Ready (containers ready and warmed up)."""
    warmed_replicas: int | None = None
    """Pods whose warm-up succeeded."""
    desired_replicas: int | None = None
    """Replicas the operator set on the Deployment."""
    selector: str | None = None
    """Label selector of the pods, as a string (for the `/scale` subresource)."""
    conditions: list[Condition] = Field(
        default_factory=list,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    autoscaling: AutoscalingStatus | None = None
    warm_up: WarmUpStatus | None = None
    kopf: dict[str, Any] = Field(default_factory=dict)
    """Bookkeeping of the kopf framework (handler progress, last handled spec), kept in
    status rather than in annotations so GitOps tools see no drift. Not for users."""


# --------------------------------------------------------------------------- object


class ModelDeployment(_Lenient):
    """A model served by NVIDIA Triton Inference Server and scaled ahead of demand."""

    api_version: str = API_VERSION
    kind: str = KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ModelDeploymentSpec
    status: ModelDeploymentStatus | None = None

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str:
        return self.metadata.namespace


class NotSerialisableError(ValueError):
    """A model holds a value the Kubernetes API cannot take (NaN or infinity)."""


def to_api(model: BaseModel, *, patch: bool = False) -> dict[str, Any]:
    """Serialise for the Kubernetes API: camelCase keys, JSON types.

    Whole objects (default): no `None` values. `patch=True` gives a JSON merge patch: only
    the fields the model was built with, so keys other writers own are left alone, and a
    field set to `None` is written as `null`, which removes it. NaN and infinity raise
    `NotSerialisableError` naming the field (`allow_nan=False` semantics): the apiserver
    would refuse the whole patch with a message that names nothing."""
    data: dict[str, Any] = model.model_dump(
        by_alias=True, mode="json", exclude_none=not patch, exclude_unset=patch
    )
    _refuse_non_finite(data, path="", model=type(model).__name__)
    return data


def _refuse_non_finite(value: Any, *, path: str, model: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise NotSerialisableError(
            f"{model}: {path or 'value'} is {value}; the Kubernetes API takes only finite "
            "numbers: fix what computed it (a division by zero, an empty series?)"
        )
    if isinstance(value, dict):
        for key, item in value.items():
            _refuse_non_finite(item, path=f"{path}.{key}" if path else str(key), model=model)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _refuse_non_finite(item, path=f"{path}[{i}]", model=model)


def to_rfc3339(ts: float) -> str:
    """Unix seconds -> `2026-01-02T03:04:05Z` (what Kubernetes writes for times)."""
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def from_rfc3339(text: str) -> float:
    """`2026-01-02T03:04:05Z` (or with fraction / offset) -> Unix seconds."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
