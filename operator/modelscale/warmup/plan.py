"""What a warm-up needs, decided without I/O.

Everything here is pure: the tritonclient adapter (`warmup.client`) and the kopf handlers
(`handlers.warmup`) feed in model metadata, measured latencies, pod bodies and `now`
(float Unix seconds), and get back inputs to send, verdicts with reasons, conditions to
write, deletion costs and start-up statistics.
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

Protocol = Literal["HTTP", "GRPC"]

# Names of the readiness gate, the pod annotations this module reads and writes.
CONDITION_TYPE = "modelscale.dev/warmed-up"
MD_LABEL = "modelscale.dev/modeldeployment"
ANNOTATION_SECONDS_TO_READY = "modelscale.dev/seconds-to-ready"
ANNOTATION_SECONDS_TO_WARM = "modelscale.dev/seconds-to-warm"
ANNOTATION_ATTEMPTS = "modelscale.dev/warm-up-attempts"
ANNOTATION_WARMED_RESTARTS = "modelscale.dev/warmed-at-restart-count"
ANNOTATION_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"

# Reasons (CamelCase) for the condition, events and metrics.
REASON_WARMED_UP = "WarmedUp"
REASON_DISABLED = "WarmUpDisabled"
REASON_IN_PROGRESS = "WarmUpInProgress"
REASON_REQUEST_FAILED = "WarmUpFailed"
REASON_NOT_STABLE = "LatencyNotStable"
REASON_MODEL_NOT_READY = "ModelNotReady"
REASON_TIMEOUT = "WarmUpTimeout"
REASON_INVALID_REQUEST = "InvalidWarmUpRequest"
REASON_CANCELLED = "WarmUpCancelled"
REASON_GAVE_UP = "WarmUpGaveUp"
REASON_RESTARTED = "ContainerRestarted"

# Short prompt for BYTES inputs: long enough to exercise the tokenizer and the prefill path.
DEFAULT_PROMPT = "Warm-up: summarise in one sentence why the sky is blue."
# vLLM's `sampling_parameters`: a handful of tokens walks the decode path without wasting time.
DEFAULT_SAMPLING_PARAMETERS: Mapping[str, Any] = {"max_tokens": 8, "temperature": 0.0}
# Integer inputs that count tokens (TensorRT-LLM ensembles): a value of 1 would skip decoding.
TOKEN_COUNT_INPUTS = frozenset({"max_tokens", "request_output_len", "max_new_tokens"})
TOKEN_COUNT_VALUE = 8
# Optional inputs worth sending; any other optional input is left out (e.g. a BYTES
# `lora_name` filled with a prompt would make every request fail).
KNOWN_OPTIONAL_INPUTS = frozenset(
    {"stream", "sampling_parameters", "exclude_input_in_output"} | TOKEN_COUNT_INPUTS
)
# Latencies closer than this to their median are equal: sub-5 ms jitter on a busy node is
# scheduler noise, not a cold model, and would otherwise keep a fast model "unstable".
LATENCY_NOISE_FLOOR_SECONDS = 0.005
# A model still getting faster after `count` requests gets up to this many times `count`
# before the attempt fails: the API's `count` is "requests per pod", not a hard stop.
EXTRA_REQUESTS_FACTOR = 4

NUMERIC_TYPES = frozenset(
    {"INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64"}
    | {"FP16", "FP32", "FP64", "BF16"}
)


class PlanError(ValueError):
    """A warm-up cannot be planned (bad explicit request, unsupported input type)."""


# ---------------------------------------------------------------------------------------
# Settings


@dataclass(frozen=True)
class SuccessCriteria:
    # The last N latencies must lie within factor × their median.
    stable_last_n: int = 3
    max_latency_factor: float = 1.5


@dataclass(frozen=True)
class ExplicitInput:
    name: str
    data: Any  # scalar, string, mapping (JSON-encoded for BYTES) or (nested) list
    datatype: str | None = None
    shape: tuple[int, ...] | None = None


@dataclass(frozen=True)
class ExplicitRequest:
    inputs: tuple[ExplicitInput, ...]
    outputs: tuple[str, ...] = ()
    parameters: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class WarmupSettings:
    """The spec's `warmUp` block, reduced to what a warm-up needs (defaults as the API's)."""

    enabled: bool = True
    protocol: Protocol = "GRPC"
    requests: tuple[ExplicitRequest, ...] = ()
    auto_generate: bool = True
    # Requests sent per attempt; more (up to EXTRA_REQUESTS_FACTOR × count) while the
    # latencies have not settled yet.
    count: int = 8
    concurrency: int = 2
    # Per request; also bounds the wait for the server and model to be ready.
    timeout_seconds: float = 60.0
    max_attempts: int = 3
    success: SuccessCriteria = field(default_factory=SuccessCriteria)


def _get(mapping: Mapping[str, Any], *keys: str) -> Any:
    """First present key: accepts the CRD's camelCase and pydantic's snake_case dumps."""
    for key in keys:
        if key in mapping and mapping[key] is not None:
            return mapping[key]
    return None


def _as_mapping(value: Any) -> Mapping[str, Any]:
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return value
    dump = getattr(value, "model_dump", None)  # a pydantic model
    if callable(dump):
        dumped: Mapping[str, Any] = dump(by_alias=True, exclude_none=True)
        return dumped
    raise PlanError(f"cannot read warm-up settings from {type(value).__name__}")


def _explicit_requests(raw: Any) -> tuple[ExplicitRequest, ...]:
    """Requests: `[{inputs: [{name, data, datatype?, shape?}]}]` or `[{inputs: {name: data}}]`."""
    out: list[ExplicitRequest] = []
    for item in raw or ():
        item_map = _as_mapping(item)
        raw_inputs = _get(item_map, "inputs")
        if raw_inputs is None:
            raise PlanError("a warm-up request needs `inputs`")
        inputs: list[ExplicitInput] = []
        if isinstance(raw_inputs, Mapping):
            for key, value in raw_inputs.items():
                if isinstance(value, Mapping) and "data" in value and "datatype" in value:
                    # The API's form: {name: {datatype, shape, data}}.
                    shape = _get(value, "shape")
                    inputs.append(
                        ExplicitInput(
                            name=str(key),
                            data=value["data"],
                            datatype=str(value["datatype"]),
                            shape=tuple(int(d) for d in shape) if shape is not None else None,
                        )
                    )
                else:
                    inputs.append(ExplicitInput(name=str(key), data=value))
        else:
            for raw_input in raw_inputs:
                m = _as_mapping(raw_input)
                shape = _get(m, "shape")
                inputs.append(
                    ExplicitInput(
                        name=str(m["name"]),
                        data=_get(m, "data", "value"),
                        datatype=_get(m, "datatype", "dataType"),
                        shape=tuple(int(d) for d in shape) if shape is not None else None,
                    )
                )
        out.append(
            ExplicitRequest(
                inputs=tuple(inputs),
                outputs=tuple(str(o) for o in _get(item_map, "outputs") or ()),
                parameters=dict(_as_mapping(_get(item_map, "parameters"))),
            )
        )
    return tuple(out)


def settings_from_spec(spec: Any) -> WarmupSettings:
    """Map a ModelDeployment spec (dict or pydantic model) to WarmupSettings.

    Reads `spec.warmUp`; missing fields keep the defaults above.
    """
    spec_map = _as_mapping(spec)
    warm = _as_mapping(_get(spec_map, "warmUp", "warm_up", "warmup"))
    defaults = WarmupSettings()
    success_map = _as_mapping(_get(warm, "success"))
    success = SuccessCriteria(
        stable_last_n=int(
            _get(success_map, "stableLastN", "stable_last_n") or defaults.success.stable_last_n
        ),
        max_latency_factor=float(
            _get(success_map, "maxLatencyFactor", "max_latency_factor")
            or defaults.success.max_latency_factor
        ),
    )
    protocol = str(_get(warm, "protocol") or defaults.protocol).upper()
    if protocol not in ("HTTP", "GRPC"):
        raise PlanError(f"warm-up protocol must be HTTP or GRPC, not {protocol!r}")
    enabled = _get(warm, "enabled")
    auto_generate = _get(warm, "autoGenerate", "auto_generate")
    return WarmupSettings(
        enabled=defaults.enabled if enabled is None else bool(enabled),
        protocol="HTTP" if protocol == "HTTP" else "GRPC",
        requests=_explicit_requests(_get(warm, "requests")),
        auto_generate=defaults.auto_generate if auto_generate is None else bool(auto_generate),
        count=int(_get(warm, "count") or defaults.count),
        concurrency=max(1, int(_get(warm, "concurrency") or defaults.concurrency)),
        timeout_seconds=float(
            _get(warm, "timeoutSeconds", "timeout_seconds") or defaults.timeout_seconds
        ),
        max_attempts=max(
            1, int(_get(warm, "maxAttempts", "max_attempts") or defaults.max_attempts)
        ),
        success=success,
    )


def model_name_from_spec(spec: Any) -> str:
    spec_map = _as_mapping(spec)
    model = _as_mapping(_get(spec_map, "model"))
    name = _get(model, "name", "modelName")
    if not name:
        raise PlanError("spec.model.name is missing")
    return str(name)


# ---------------------------------------------------------------------------------------
# Inputs


@dataclass(frozen=True)
class ModelInput:
    name: str
    datatype: str
    shape: tuple[int, ...]  # -1 for variable dimensions
    optional: bool = False


@dataclass(frozen=True)
class Tensor:
    """One input ready to send: flat values in row-major order (bytes for BYTES)."""

    name: str
    datatype: str
    shape: tuple[int, ...]
    values: tuple[Any, ...]


@dataclass(frozen=True)
class RequestTemplate:
    tensors: tuple[Tensor, ...]
    outputs: tuple[str, ...] = ()  # empty: all outputs
    parameters: Mapping[str, Any] = field(default_factory=dict)  # request parameters


def model_inputs(
    metadata: Mapping[str, Any], config: Mapping[str, Any] | None = None
) -> tuple[ModelInput, ...]:
    """Inputs from tritonclient's `get_model_metadata` (HTTP dict, or gRPC `as_json=True`,
    whose int64 dims arrive as strings) and, if given, `get_model_config` for optionality."""
    cfg = _as_mapping(config)
    cfg = _as_mapping(cfg.get("config", cfg))  # gRPC as_json wraps it in {"config": ...}
    optional = {str(i["name"]) for i in cfg.get("input", ()) if i.get("optional")}
    out = []
    for raw in metadata.get("inputs", ()):
        name = str(raw["name"])
        out.append(
            ModelInput(
                name=name,
                datatype=str(raw["datatype"]).upper(),
                shape=tuple(int(d) for d in raw.get("shape", ())),
                optional=name in optional,
            )
        )
    return tuple(out)


def is_decoupled(config: Mapping[str, Any] | None) -> bool:
    """Decoupled models (vLLM backend) answer only over a gRPC stream."""
    cfg = _as_mapping(config)
    cfg = _as_mapping(cfg.get("config", cfg))
    policy = _as_mapping(_get(cfg, "model_transaction_policy", "modelTransactionPolicy"))
    return bool(policy.get("decoupled", False))


def _concrete_shape(shape: Sequence[int], n_values: int = 1) -> tuple[int, ...]:
    """Resolve -1 dims: the first takes what the values need, the others become 1."""
    known = math.prod(d for d in shape if d >= 0)
    out: list[int] = []
    filled = False
    for d in shape:
        if d >= 0:
            out.append(d)
        elif not filled and known > 0 and n_values % known == 0:
            out.append(max(1, n_values // known))
            filled = True
        else:
            out.append(1)
    return tuple(out)


def _generated_value(inp: ModelInput) -> Any:
    lname = inp.name.lower()
    if inp.datatype == "BYTES":
        if lname == "sampling_parameters":
            return json.dumps(DEFAULT_SAMPLING_PARAMETERS).encode()
        return DEFAULT_PROMPT.encode()
    if inp.datatype == "BOOL":
        # `stream=False`: one complete answer per request; `exclude_input_in_output=True`.
        return lname == "exclude_input_in_output"
    if inp.datatype in NUMERIC_TYPES:
        if lname in TOKEN_COUNT_INPUTS:
            return TOKEN_COUNT_VALUE
        # Ones, not zeros: valid as token ids, lengths and counts alike.
        return 1.0 if inp.datatype.startswith(("FP", "BF")) else 1
    raise PlanError(f"cannot generate a value for input {inp.name!r} of type {inp.datatype}")


def generate_tensor(inp: ModelInput) -> Tensor:
    shape = _concrete_shape(inp.shape)
    value = _generated_value(inp)
    return Tensor(
        name=inp.name, datatype=inp.datatype, shape=shape, values=(value,) * math.prod(shape)
    )


def _flatten(data: Any) -> list[Any]:
    if isinstance(data, list | tuple):
        return [v for item in data for v in _flatten(item)]
    return [data]


def _encode(value: Any, datatype: str, name: str) -> Any:
    if datatype == "BYTES":
        if isinstance(value, bytes):
            return value
        if isinstance(value, str):
            return value.encode()
        return json.dumps(value).encode()  # e.g. sampling_parameters given as a mapping
    if datatype == "BOOL":
        return bool(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PlanError(f"input {name!r} of type {datatype} needs numbers, got {value!r}")
    if datatype.startswith(("FP", "BF")):
        return float(value)
    if float(value) != int(value):
        raise PlanError(f"input {name!r} of type {datatype} needs integers, got {value!r}")
    return int(value)


def explicit_tensor(given: ExplicitInput, declared: ModelInput | None) -> Tensor:
    datatype = (given.datatype or (declared.datatype if declared else "")).upper()
    if not datatype:
        raise PlanError(f"input {given.name!r} is not declared by the model and has no datatype")
    if declared is not None and declared.datatype != datatype:
        raise PlanError(f"input {given.name!r} is {declared.datatype} in the model, not {datatype}")
    # A mapping given for a BYTES input is one JSON value, not a list to flatten.
    flat = [given.data] if isinstance(given.data, Mapping) else _flatten(given.data)
    values = tuple(_encode(v, datatype, given.name) for v in flat)
    if given.shape is not None:
        shape = _concrete_shape(given.shape, len(values))
    elif declared is not None:
        shape = _concrete_shape(declared.shape, len(values))
    else:
        shape = (len(values),)
    if math.prod(shape) != len(values):
        raise PlanError(
            f"input {given.name!r}: shape {list(shape)} needs {math.prod(shape)} values, "
            f"got {len(values)}"
        )
    return Tensor(name=given.name, datatype=datatype, shape=shape, values=values)


def plan_requests(
    *, settings: WarmupSettings, inputs: Sequence[ModelInput]
) -> tuple[RequestTemplate, ...]:
    """The requests to cycle through: the explicit ones (missing inputs generated when
    `autoGenerate` is on), else one generated request covering the model's inputs."""
    declared = {i.name: i for i in inputs}

    def generated_for(missing: Iterable[ModelInput]) -> list[Tensor]:
        return [
            generate_tensor(i)
            for i in missing
            if not i.optional or i.name.lower() in KNOWN_OPTIONAL_INPUTS
        ]

    if settings.requests:
        templates = []
        for request in settings.requests:
            unknown = [g.name for g in request.inputs if g.name not in declared]
            if unknown and declared:
                raise PlanError(
                    f"warm-up request names inputs the model does not have: {', '.join(unknown)}"
                    f" (model inputs: {', '.join(declared)})"
                )
            tensors = [explicit_tensor(g, declared.get(g.name)) for g in request.inputs]
            given = {g.name for g in request.inputs}
            missing = [i for i in inputs if i.name not in given]
            if settings.auto_generate:
                tensors += generated_for(missing)
            elif required := [i.name for i in missing if not i.optional]:
                raise PlanError(f"warm-up request lacks required inputs: {', '.join(required)}")
            templates.append(
                RequestTemplate(
                    tensors=tuple(tensors),
                    outputs=request.outputs,
                    parameters=request.parameters,
                )
            )
        return tuple(templates)
    if not settings.auto_generate:
        raise PlanError("warm-up is enabled but has neither requests nor autoGenerate")
    if not inputs:
        raise PlanError("the model declares no inputs to generate")
    return (RequestTemplate(tensors=tuple(generated_for(inputs))),)


# ---------------------------------------------------------------------------------------
# Success criteria


@dataclass(frozen=True)
class Sample:
    ok: bool
    latency_seconds: float
    error: str = ""


@dataclass(frozen=True)
class WarmupResult:
    ok: bool
    reason: str
    message: str
    requests: int = 0
    duration_seconds: float = 0.0
    median_latency_seconds: float | None = None  # of the last N (the warmed latency)
    first_latency_seconds: float | None = None  # the cold one
    latencies: tuple[float, ...] = ()


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 10 else f"{seconds:.1f} s"


def is_stable(latencies: Sequence[float], criteria: SuccessCriteria) -> bool:
    """The last N latencies lie within factor × their median (both ways), and they are not
    still falling step by step: a cold start that decays gradually (caches filling) stays
    within a loose factor from one request to the next while the model is still warming."""
    n = max(1, criteria.stable_last_n)
    if len(latencies) < n:
        return False
    window = latencies[-n:]
    median = statistics.median(window)
    high = median * criteria.max_latency_factor + LATENCY_NOISE_FLOOR_SECONDS
    low = median / criteria.max_latency_factor - LATENCY_NOISE_FLOOR_SECONDS
    within = all(low <= x <= high for x in window)
    still_falling = n > 1 and all(
        later < earlier - LATENCY_NOISE_FLOOR_SECONDS
        for earlier, later in itertools.pairwise(window)
    )
    return within and not still_falling


def judge(
    *, samples: Sequence[Sample], settings: WarmupSettings, duration_seconds: float
) -> WarmupResult | None:
    """Verdict after each completed request: None means "send more"."""
    latencies = tuple(s.latency_seconds for s in samples)
    first = latencies[0] if latencies else None
    failed = [s for s in samples if not s.ok]
    if failed:
        return WarmupResult(
            ok=False,
            reason=REASON_REQUEST_FAILED,
            message=(
                f"{len(failed)} of {len(samples)} warm-up requests failed "
                f"after {duration_seconds:.1f} s: {failed[0].error[:200]}"
            ),
            requests=len(samples),
            duration_seconds=duration_seconds,
            first_latency_seconds=first,
            latencies=latencies,
        )
    n = max(1, settings.success.stable_last_n)
    median = statistics.median(latencies[-n:]) if latencies else None
    if len(samples) >= minimum_requests(settings=settings) and is_stable(
        latencies, settings.success
    ):
        assert median is not None and first is not None
        return WarmupResult(
            ok=True,
            reason=REASON_WARMED_UP,
            message=(
                f"warmed up with {len(samples)} requests in {duration_seconds:.1f} s; "
                f"median latency {_ms(median)} over the last {n} "
                f"(first request {_ms(first)})"
            ),
            requests=len(samples),
            duration_seconds=duration_seconds,
            median_latency_seconds=median,
            first_latency_seconds=first,
            latencies=latencies,
        )
    if len(samples) >= budget(settings=settings):
        spread = (
            f"; last {n} between {_ms(min(latencies[-n:]))} and {_ms(max(latencies[-n:]))}"
            if len(latencies) >= n
            else ""
        )
        return WarmupResult(
            ok=False,
            reason=REASON_NOT_STABLE,
            message=(
                f"latency still not within {settings.success.max_latency_factor}x of its median "
                f"after {len(samples)} requests in {duration_seconds:.1f} s{spread}"
            ),
            requests=len(samples),
            duration_seconds=duration_seconds,
            median_latency_seconds=median,
            first_latency_seconds=first,
            latencies=latencies,
        )
    return None


def failure(
    *, reason: str, message: str, samples: Sequence[Sample] = (), duration_seconds: float = 0.0
) -> WarmupResult:
    latencies = tuple(s.latency_seconds for s in samples)
    return WarmupResult(
        ok=False,
        reason=reason,
        message=message,
        requests=len(samples),
        duration_seconds=duration_seconds,
        first_latency_seconds=latencies[0] if latencies else None,
        latencies=latencies,
    )


def minimum_requests(*, settings: WarmupSettings) -> int:
    """Requests one attempt sends at least: `count` (and never fewer than N)."""
    return max(settings.count, settings.success.stable_last_n, 1)


def budget(*, settings: WarmupSettings) -> int:
    """Most requests one attempt may send: `count`, then more while latencies still fall."""
    return minimum_requests(settings=settings) * EXTRA_REQUESTS_FACTOR


# ---------------------------------------------------------------------------------------
# Retries


def backoff_seconds(*, attempt: int, base: float = 10.0, cap: float = 300.0) -> float:
    """Delay before attempt `attempt + 1` after `attempt` failures (1-based): 10, 20, 40 … 300."""
    if attempt <= 0:
        return 0.0
    return float(min(cap, base * 2 ** (attempt - 1)))


def should_give_up(*, attempts: int, settings: WarmupSettings) -> bool:
    return attempts >= settings.max_attempts


# ---------------------------------------------------------------------------------------
# Pods


def _parse_time(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.timestamp()
    text = str(value)
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def format_time(t: float) -> str:
    """RFC 3339 in UTC with second precision, as Kubernetes writes condition times."""
    return datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _condition(pod: Mapping[str, Any], ctype: str) -> Mapping[str, Any] | None:
    status = _as_mapping(pod.get("status"))
    for cond in status.get("conditions") or ():
        if cond.get("type") == ctype:
            return _as_mapping(cond)
    return None


def _float_or_none(value: Any) -> float | None:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class PodFacts:
    """What the warm-up needs to know about one pod, read from its body."""

    namespace: str
    name: str
    uid: str
    modeldeployment: str | None
    ip: str | None
    created: float | None
    deleting: bool
    containers_ready: bool
    containers_ready_since: float | None
    warmed: bool
    warmed_condition: Mapping[str, Any] | None
    attempts: int
    seconds_to_ready: float | None
    seconds_to_warm: float | None
    annotations: Mapping[str, str]
    restarts: int = 0  # container restarts, summed over the pod's containers


def pod_facts(pod: Mapping[str, Any]) -> PodFacts:
    meta = _as_mapping(pod.get("metadata"))
    status = _as_mapping(pod.get("status"))
    labels = _as_mapping(meta.get("labels"))
    annotations = {str(k): str(v) for k, v in _as_mapping(meta.get("annotations")).items()}
    ready = _condition(pod, "ContainersReady")
    warmed = _condition(pod, CONDITION_TYPE)
    attempts_raw = annotations.get(ANNOTATION_ATTEMPTS, "0")
    return PodFacts(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        modeldeployment=labels.get(MD_LABEL),
        ip=_get(status, "podIP", "pod_ip"),
        created=_parse_time(_get(meta, "creationTimestamp", "creation_timestamp")),
        deleting=_get(meta, "deletionTimestamp", "deletion_timestamp") is not None,
        containers_ready=ready is not None and ready.get("status") == "True",
        containers_ready_since=_parse_time(
            _get(ready, "lastTransitionTime", "last_transition_time") if ready else None
        ),
        warmed=warmed is not None and warmed.get("status") == "True",
        warmed_condition=warmed,
        attempts=int(attempts_raw) if attempts_raw.isdigit() else 0,
        seconds_to_ready=_float_or_none(annotations.get(ANNOTATION_SECONDS_TO_READY)),
        seconds_to_warm=_float_or_none(annotations.get(ANNOTATION_SECONDS_TO_WARM)),
        annotations=annotations,
        restarts=sum(
            int(_get(cs, "restartCount", "restart_count") or 0)
            for cs in _get(status, "containerStatuses", "container_statuses") or ()
        ),
    )


def cold_again(facts: PodFacts) -> bool:
    """A warmed pod whose container restarted since its warm-up serves a cold model again:
    its gate must close until it is warmed anew (or a user would hit the cold start)."""
    recorded = facts.annotations.get(ANNOTATION_WARMED_RESTARTS)
    return (
        facts.warmed
        and recorded is not None
        and recorded.isdigit()
        and (facts.restarts > int(recorded))
    )


def needs_warmup(facts: PodFacts) -> bool:
    return (
        facts.containers_ready
        and not facts.warmed
        and not facts.deleting
        and facts.ip is not None
        and facts.modeldeployment is not None
    )


def warmed_condition(
    *, status: bool, reason: str, message: str, now: float, previous: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The pod condition; lastTransitionTime moves only when the status changes."""
    status_text = "True" if status else "False"
    since = format_time(now)
    if previous is not None and previous.get("status") == status_text:
        since = str(_get(previous, "lastTransitionTime", "last_transition_time") or since)
    return {
        "type": CONDITION_TYPE,
        "status": status_text,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
    }


def status_patch(condition: Mapping[str, Any], *, uid: str = "") -> dict[str, Any]:
    """Strategic merge patch for `pods/status`: conditions merge by `type`. With `uid` the
    apiserver refuses to patch a different pod that took the same name."""
    patch: dict[str, Any] = {"status": {"conditions": [dict(condition)]}}
    if uid:
        patch["metadata"] = {"uid": uid}
    return patch


def condition_differs(
    previous: Mapping[str, Any] | None, *, status: bool, reason: str, message: str
) -> bool:
    """Whether writing this condition would change anything a user sees."""
    if previous is None:
        return True
    return (
        previous.get("status") != ("True" if status else "False")
        or previous.get("reason") != reason
        or previous.get("message") != message
    )


@dataclass(frozen=True)
class Crashes:
    """Container exits of a pod that never became ready: a model failing to load makes
    Triton exit (`failed to load all models`) and the kubelet restart it."""

    restarts: int
    message: str


def container_crashes(pod: Mapping[str, Any]) -> Crashes | None:
    status = _as_mapping(pod.get("status"))
    worst: Crashes | None = None
    for cs in _get(status, "containerStatuses", "container_statuses") or ():
        restarts = int(_get(cs, "restartCount", "restart_count") or 0)
        last = _as_mapping(_get(_as_mapping(_get(cs, "lastState", "last_state")), "terminated"))
        now_state = _as_mapping(_get(_as_mapping(cs.get("state")), "terminated"))
        terminated = now_state or last
        code = _get(terminated, "exitCode", "exit_code")
        if restarts == 0 and not now_state:
            continue
        if code == 0 and not restarts:
            continue
        detail = " ".join(
            str(x) for x in (terminated.get("reason"), terminated.get("message")) if x
        )
        message = (
            f"container {cs.get('name')} exited {restarts + (1 if now_state else 0)} time(s) "
            f"before the model was ready (last exit code {code}"
            + (f": {detail[:300]}" if detail else "")
            + ")"
        )
        crashes = Crashes(restarts=restarts + (1 if now_state else 0), message=message)
        if worst is None or crashes.restarts > worst.restarts:
            worst = crashes
    return worst


def seconds_to_ready(facts: PodFacts) -> float | None:
    if facts.created is None or facts.containers_ready_since is None:
        return None
    return max(0.0, facts.containers_ready_since - facts.created)


def seconds_since_created(facts: PodFacts, *, now: float) -> float | None:
    return None if facts.created is None else max(0.0, now - facts.created)


# ---------------------------------------------------------------------------------------
# Scale-down order


def deletion_cost(*, containers_ready: bool, warmed: bool, load: float | None) -> int:
    """`controller.kubernetes.io/pod-deletion-cost`: the ReplicaSet deletes lower costs first.

    Pods still starting go first, then pods warming, then warmed pods by load (requests/s
    over the last refresh, in hundredths; unknown load counts as idle).
    """
    if not containers_ready:
        return -2000
    if not warmed:
        return -1000
    milli = round(max(0.0, load or 0.0) * 100)
    return min(1_000_000, milli)


def annotation_updates(
    facts: PodFacts,
    *,
    now: float,
    load: float | None,
    warmed: bool | None = None,
    attempts: int | None = None,
) -> dict[str, str]:
    """Pod annotations that need writing (only those that change): start-up figures (once),
    the attempt counter and the deletion cost. `warmed`/`attempts` override the facts when
    the caller is about to change them."""
    out: dict[str, str] = {}
    is_warmed = facts.warmed if warmed is None else warmed
    if facts.seconds_to_ready is None and facts.containers_ready:
        ready = seconds_to_ready(facts)
        if ready is not None:
            out[ANNOTATION_SECONDS_TO_READY] = f"{ready:.1f}"
    if is_warmed and facts.seconds_to_warm is None:
        warm = seconds_since_created(facts, now=now)
        if facts.warmed and facts.warmed_condition is not None:
            # Already warmed (by an earlier operator run): the condition knows when.
            _, warm = pod_startup_seconds(facts)
        if warm is not None:
            out[ANNOTATION_SECONDS_TO_WARM] = f"{warm:.1f}"
    if attempts is not None and attempts != facts.attempts:
        out[ANNOTATION_ATTEMPTS] = str(attempts)
    if warmed and not facts.warmed:  # about to open the gate: remember the restart count
        out[ANNOTATION_WARMED_RESTARTS] = str(facts.restarts)
    cost = deletion_cost(containers_ready=facts.containers_ready, warmed=is_warmed, load=load)
    old = facts.annotations.get(ANNOTATION_DELETION_COST)
    if old is None or cost_needs_update(old=int(old) if _is_int(old) else None, new=cost):
        out[ANNOTATION_DELETION_COST] = str(cost)
    return out


def _is_int(text: str) -> bool:
    return text.lstrip("-").isdigit()


def cost_needs_update(*, old: int | None, new: int) -> bool:
    """Rewrite the cost when its class changes or the load moved by more than 20 %: every
    write is a pod update for every watcher, so small load wiggles are not worth one."""
    if old is None:
        return True
    if (old < 0) != (new < 0) or (old < 0 and old != new):
        return True
    return abs(new - old) > max(10, 0.2 * abs(old))


def request_rate(
    *, previous_count: float, previous_time: float, count: float, time: float
) -> float | None:
    """Requests/s between two samples of a counter; None across a counter reset."""
    if time <= previous_time or count < previous_count:
        return None
    return (count - previous_count) / (time - previous_time)


# ---------------------------------------------------------------------------------------
# Start-up statistics


@dataclass(frozen=True)
class StartupStats:
    samples_ready: int
    samples_warm: int
    median_seconds_to_ready: float | None
    median_seconds_to_warm: float | None


def pod_startup_seconds(facts: PodFacts) -> tuple[float | None, float | None]:
    """(creation → containers ready, creation → warmed): annotations first (they survive
    container restarts), else the conditions' transition times."""
    ready = (
        facts.seconds_to_ready if facts.seconds_to_ready is not None else seconds_to_ready(facts)
    )
    warm = facts.seconds_to_warm
    if warm is None and facts.warmed and facts.created is not None and facts.warmed_condition:
        since = _parse_time(
            _get(facts.warmed_condition, "lastTransitionTime", "last_transition_time")
        )
        warm = None if since is None else max(0.0, since - facts.created)
    return ready, warm


def warmup_stats_for(
    *, md_namespace: str, md_name: str, pods: Iterable[Mapping[str, Any]], recent: int = 20
) -> StartupStats:
    """Median start-up times over the `recent` newest measured pods of one ModelDeployment."""
    mine = [
        f
        for f in (pod_facts(p) for p in pods)
        if f.namespace == md_namespace and f.modeldeployment == md_name
    ]
    mine.sort(key=lambda f: f.created or 0.0, reverse=True)
    ready: list[float] = []
    warm: list[float] = []
    for f in mine:
        r, w = pod_startup_seconds(f)
        if r is not None and len(ready) < recent:
            ready.append(r)
        if w is not None and len(warm) < recent:
            warm.append(w)
    return StartupStats(
        samples_ready=len(ready),
        samples_warm=len(warm),
        median_seconds_to_ready=statistics.median(ready) if ready else None,
        median_seconds_to_warm=statistics.median(warm) if warm else None,
    )
