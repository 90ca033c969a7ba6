"""The warm-up requests to send, decided without I/O: the model's inputs as Triton
declares them (metadata and config from tritonclient) and the spec's `warmUp` (the typed
API model), turned into tensors ready to send."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from modelscale.api.v1alpha1 import InferInput, WarmUp

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


NUMERIC_TYPES = frozenset(
    {"INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64"}
    | {"FP16", "FP32", "FP64", "BF16"}
)


class PlanError(ValueError):
    """A warm-up cannot be planned (bad explicit request, unsupported input type)."""


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


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
    cfg = _mapping(config)
    cfg = _mapping(cfg.get("config", cfg))  # gRPC as_json wraps it in {"config": ...}
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
    cfg = _mapping(config)
    cfg = _mapping(cfg.get("config", cfg))
    policy = _mapping(cfg.get("model_transaction_policy") or cfg.get("modelTransactionPolicy"))
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


def explicit_tensor(name: str, given: InferInput, declared: ModelInput | None) -> Tensor:
    """One input of an explicit request (the API's `{datatype, shape, data}`), checked
    against what the model declares."""
    datatype = given.datatype.upper()
    if declared is not None and declared.datatype != datatype:
        raise PlanError(f"input {name!r} is {declared.datatype} in the model, not {datatype}")
    values = tuple(_encode(v, datatype, name) for v in _flatten(given.data))
    shape = _concrete_shape(given.shape, len(values))
    if math.prod(shape) != len(values):
        raise PlanError(
            f"input {name!r}: shape {list(shape)} needs {math.prod(shape)} values, "
            f"got {len(values)}"
        )
    return Tensor(name=name, datatype=datatype, shape=shape, values=values)


def plan_requests(*, settings: WarmUp, inputs: Sequence[ModelInput]) -> tuple[RequestTemplate, ...]:
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
            unknown = [name for name in request.inputs if name not in declared]
            if unknown and declared:
                raise PlanError(
                    f"warm-up request names inputs the model does not have: {', '.join(unknown)}"
                    f" (model inputs: {', '.join(declared)})"
                )
            tensors = [
                explicit_tensor(name, given, declared.get(name))
                for name, given in request.inputs.items()
            ]
            missing = [i for i in inputs if i.name not in request.inputs]
            if settings.auto_generate:
                tensors += generated_for(missing)
            elif required := [i.name for i in missing if not i.optional]:
                raise PlanError(f"warm-up request lacks required inputs: {', '.join(required)}")
            templates.append(
                RequestTemplate(
                    tensors=tuple(tensors),
                    outputs=tuple(request.outputs),
                    parameters=request.parameters,
                )
            )
        return tuple(templates)
    if not settings.auto_generate:
        raise PlanError("warm-up is enabled but has neither requests nor autoGenerate")
    if not inputs:
        raise PlanError("the model declares no inputs to generate")
    return (RequestTemplate(tensors=tuple(generated_for(inputs))),)
