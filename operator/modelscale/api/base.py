"""Shared building blocks of the ModelDeployment API (`v1alpha1`, `status`): the pydantic
base classes (camelCase aliases, attribute docstrings as field descriptions), the quantity
type, and serialisation for the Kubernetes API (`to_api`, RFC 3339 times). Pure."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from decimal import Decimal
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema
from pydantic.alias_generators import to_camel

# Kubernetes' quantity grammar (k8s.io/apimachinery/pkg/api/resource), as the pattern
# controller-gen writes for `resource.Quantity`: a decimal number, then a binary suffix
# (Ki .. Ei), a decimal suffix (n u m k M G T P E) or an exponent (e3, E-2). Unsigned here:
# every quantity of the spec is a container request, a limit or a volume size, and the
# apiserver refuses a negative one in the Deployment it would become.
QUANTITY_PATTERN = (
    r"^\+?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
_QUANTITY = re.compile(QUANTITY_PATTERN)
MSG_QUANTITY = (
    "must be a non-negative Kubernetes quantity: an integer such as 4 or a string such as "
    '"500m", "1.5" or "32Gi"'
)

# Kubernetes' own name grammars (k8s.io/apimachinery/pkg/util/validation), for fields that
# end up in a child object where the apiserver checks them.
DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_PREFIX = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
# A label or annotation key, a topology key: `name` or `prefix/name` (IsQualifiedName).
QUALIFIED_NAME_PATTERN = rf"^({_PREFIX}/)?{_LABEL_NAME}$"
# A label value: empty, or up to 63 letters, digits, `-`, `_`, `.`, alphanumeric at the ends.
LABEL_VALUE_PATTERN = rf"^({_LABEL_NAME})?$"
# An extended resource such as `nvidia.com/gpu`: a qualified name with a domain.
EXTENDED_RESOURCE_PATTERN = rf"^{_PREFIX}/{_LABEL_NAME}$"


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


# Quantity suffixes as Kubernetes reads them (resource.Quantity), for comparing two of them.
_SUFFIX = {
    **{s: Decimal(1024) ** (i + 1) for i, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))},
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
    "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
    "P": Decimal("1e15"), "E": Decimal("1e18"),
}  # fmt: skip


def quantity_value(text: str) -> Decimal:
    """The number a quantity that matched `QUANTITY_PATTERN` stands for (`"1.5Gi"` ->
    1610612736), to compare two quantities the way the apiserver does."""
    suffix = next((s for s in ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei") if text.endswith(s)), "")
    if not suffix and text[-1:] in _SUFFIX and not text[-1:].isdigit():
        suffix = text[-1]
    return Decimal(text[: len(text) - len(suffix)] or "0") * _SUFFIX[suffix]


Quantity = Annotated[
    str,
    BeforeValidator(_quantity),
    WithJsonSchema({"x-kubernetes-int-or-string": True, "pattern": QUANTITY_PATTERN, "minimum": 0}),
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
