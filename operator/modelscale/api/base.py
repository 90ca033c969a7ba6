"""Shared building blocks of the ModelDeployment API (`v1alpha1`, `status`): the pydantic
base classes (camelCase aliases, attribute docstrings as field descriptions), the quantity
type, and serialisation for the Kubernetes API (`to_api`, RFC 3339 times). Pure."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema
from pydantic.alias_generators import to_camel

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
