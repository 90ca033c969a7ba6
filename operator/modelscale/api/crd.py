"""Generate the ModelDeployment CustomResourceDefinition from the pydantic models.

pydantic emits JSON Schema 2020-12; the apiserver wants a *structural* OpenAPI v3.0
schema. The translation, node by node:
- `$ref` / `$defs` are inlined (the apiserver resolves no references);
- `anyOf: [X, {type: null}]` (an optional field) becomes X: a field left out is how
  Kubernetes says "unset", and the apiserver prunes nulls;
- int-or-string fields get `x-kubernetes-int-or-string: true`;
- free-form objects (`dict[str, Any]`) get `x-kubernetes-preserve-unknown-fields: true`,
  `Any` values get only that marker, typed maps keep `additionalProperties`;
- `additionalProperties: false` is dropped (structural schemas forbid it next to
  `properties`; the apiserver prunes unknown fields and `kubectl apply` rejects them);
- numeric `exclusiveMinimum: n` becomes `minimum: n, exclusiveMinimum: true` (OpenAPI 3.0);
  a fractional minimum of a number also gets a CEL rule (the apiserver compares an integer
  value with the minimum truncated to an integer);
- `title` is dropped; `default` is kept in the spec (the apiserver applies it) and
  dropped in the status (only the operator writes status); a nested block's `default: {}`
  is expanded into its fields' defaults (the apiserver checks CEL rules against it as is).
The cross-field CEL rules come from `v1alpha1.SPEC_RULES`.

Hand-written rather than a library: the few converters on PyPI target other schema
dialects, and this translation is small, total and tested against the real apiserver.
"""

from __future__ import annotations

import copy
import sys
from typing import Any

import yaml

from modelscale.api import v1alpha1

Schema = dict[str, Any]

_DROP = {"title", "$defs"}


def _resolve(node: Any, defs: dict[str, Schema]) -> Any:
    if isinstance(node, list):
        return [_resolve(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = copy.deepcopy(defs[node["$ref"].rsplit("/", 1)[-1]])
        # Keywords beside the $ref (description, default) win over the target's.
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _resolve(merged, defs)
    return {key: _resolve(value, defs) for key, value in node.items()}


def _structural(node: Schema, *, in_status: bool) -> Schema:
    node = {k: v for k, v in node.items() if k not in _DROP}
    if "description" in node:
        # Docstrings wrap at 100 columns; kubectl explain re-wraps one paragraph.
        node["description"] = " ".join(node["description"].split())
    if in_status:
        node.pop("default", None)

    any_of = node.pop("anyOf", None)
    if any_of is not None:
        variants = [v for v in any_of if v.get("type") != "null"]
        types = sorted(v.get("type", "") for v in variants)
        if node.pop("x-int-or-string", False) or types == ["integer", "string"]:
            node["x-kubernetes-int-or-string"] = True
        elif len(variants) == 1:
            node = {k: v for k, v in {**variants[0], **node}.items() if k not in _DROP}
        else:
            raise ValueError(f"cannot express anyOf {any_of} in a structural schema")
        if node.get("default", 0) is None:
            del node["default"]
    node.pop("x-int-or-string", None)

    if "exclusiveMinimum" in node and not isinstance(node["exclusiveMinimum"], bool):
        node["minimum"] = node["exclusiveMinimum"]
        node["exclusiveMinimum"] = True
    if "exclusiveMaximum" in node and not isinstance(node["exclusiveMaximum"], bool):
        node["maximum"] = node["exclusiveMaximum"]
        node["exclusiveMaximum"] = True

    low = node.get("minimum")
    if node.get("type") == "number" and isinstance(low, float) and not low.is_integer():
        # The apiserver compares an integer value with int64(minimum): `p99Seconds: 0` passed
        # `minimum: 0.001`. CEL compares numbers as numbers.
        op = ">" if node.get("exclusiveMinimum") else ">="
        words = "greater than" if op == ">" else "greater than or equal to"
        node.setdefault("x-kubernetes-validations", []).append(
            {"rule": f"self {op} {low!r}", "message": f"should be {words} {low:g}"}
        )

    if not node.get("type") and not node.get("x-kubernetes-int-or-string"):
        # `Any`: keep whatever the user wrote.
        return {**node, "x-kubernetes-preserve-unknown-fields": True}

    if node.get("type") == "object":
        props = node.get("properties")
        extra = node.pop("additionalProperties", None)
        if props is not None:
            node["properties"] = {
                name: _structural(sub, in_status=in_status) for name, sub in props.items()
            }
        elif isinstance(extra, dict) and extra.get("type"):
            node["additionalProperties"] = _structural(extra, in_status=in_status)
        else:
            node["x-kubernetes-preserve-unknown-fields"] = True
    if node.get("type") == "array" and "items" in node:
        node["items"] = _structural(node["items"], in_status=in_status)
    return _ordered(node)


_FIRST = ("type", "description", "default")
_LAST = ("required", "properties", "additionalProperties", "items", "x-kubernetes-validations")


def _ordered(node: Schema) -> Schema:
    """Stable, readable key order: type and description first, children last."""
    middle = sorted(k for k in node if k not in _FIRST and k not in _LAST)
    return {k: node[k] for k in (*_FIRST, *middle, *_LAST) if k in node}


def _expand_defaults(node: Schema) -> None:
    """Replace each `default: {}` by the object its fields' defaults make. The apiserver
    checks CEL rules against a default as written, without nested defaulting, so `{}` would
    fail rules such as `self.drainSeconds < self.terminationGracePeriodSeconds`."""
    for sub in node.get("properties", {}).values():
        _expand_defaults(sub)
    if node.get("default") == {} and "properties" in node:
        node["default"] = {
            name: sub["default"] for name, sub in node["properties"].items() if "default" in sub
        }


def _at(schema: Schema, path: str) -> Schema:
    """The node at `path` ("server.env[]": the items of the list `server.env`)."""
    for part in filter(None, path.split(".")):
        field, items = part.removesuffix("[]"), part.endswith("[]")
        schema = schema["properties"][field]
        if items:
            schema = schema["items"]
    return schema


def _add_rules(spec: Schema) -> None:
    for path, rule, message in v1alpha1.SPEC_RULES:
        target = _at(spec, path)
        target.setdefault("x-kubernetes-validations", []).append({"rule": rule, "message": message})


def openapi_schema() -> Schema:
    """The structural OpenAPI v3 schema of the whole ModelDeployment object."""
    raw = v1alpha1.ModelDeployment.model_json_schema(by_alias=True, mode="validation")
    defs = raw.get("$defs", {})
    spec = _structural(_resolve(defs["ModelDeploymentSpec"], defs), in_status=False)
    status = _structural(_resolve(defs["ModelDeploymentStatus"], defs), in_status=True)
    _expand_defaults(spec)
    _add_rules(spec)
    return {
        "type": "object",
        "description": raw.get("description", ""),
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
        "x-kubernetes-validations": [
            {"rule": rule, "message": message} for rule, message in v1alpha1.OBJECT_RULES
        ],
    }


READY_PATH = '.status.conditions[?(@.type=="Ready")].status'

PRINTER_COLUMNS: list[Schema] = [
    {"name": "Ready", "type": "string", "jsonPath": READY_PATH,
     "description": "Enough replicas serve warmed (the Ready condition)"},
    {"name": "Warmed", "type": "integer", "jsonPath": ".status.readyReplicas",
     "description": "Pods Ready (containers ready and warmed up)"},
    {"name": "Replicas", "type": "integer", "jsonPath": ".status.replicas",
     "description": "Pods of the current Deployment"},
    {"name": "Desired", "type": "integer", "jsonPath": ".status.desiredReplicas",
     "description": "Replicas the operator set"},
    {"name": "Tokens/s", "type": "number", "jsonPath": ".status.autoscaling.currentTokenRate",
     "description": "Output tokens/s now"},
    {"name": "P99", "type": "number", "jsonPath": ".status.autoscaling.currentP99Seconds",
     "description": "P99 latency of the SLO signal now (seconds)"},
    {"name": "SLO", "type": "number",
     "jsonPath": ".spec.scaling.targets.latencySLO.p99Seconds",
     "description": "P99 latency objective (seconds)"},
    {"name": "Mode", "type": "string", "jsonPath": ".spec.scaling.mode",
     "description": "Scaling mode"},
    {"name": "Model", "type": "string", "jsonPath": ".spec.model.name", "priority": 1,
     "description": "Triton model name"},
    {"name": "Reason", "type": "string", "jsonPath": ".status.autoscaling.reason",
     "description": "Why this size: reason of the last autoscaler decision"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]  # fmt: skip


def build() -> Schema:
    """The complete CustomResourceDefinition object."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{v1alpha1.PLURAL}.{v1alpha1.GROUP}",
            "labels": {"app.kubernetes.io/name": "modelscale"},
        },
        "spec": {
            "group": v1alpha1.GROUP,
            "names": {
                "kind": v1alpha1.KIND,
                "listKind": f"{v1alpha1.KIND}List",
                "plural": v1alpha1.PLURAL,
                "singular": v1alpha1.SINGULAR,
                "shortNames": list(v1alpha1.SHORT_NAMES),
                "categories": list(v1alpha1.CATEGORIES),
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": v1alpha1.VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": openapi_schema()},
                    "subresources": {
                        "status": {},
                        "scale": {
                            "specReplicasPath": ".spec.replicas",
                            "statusReplicasPath": ".status.replicas",
                            "labelSelectorPath": ".status.selector",
                        },
                    },
                    "additionalPrinterColumns": PRINTER_COLUMNS,
                }
            ],
        },
    }


class _Dumper(yaml.SafeDumper):
    """Plain YAML: no anchors/aliases for repeated defaults."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def render() -> str:
    """The CRD as YAML. Deterministic: insertion order follows the models."""
    header = "# Generated by `modelscale crd` from modelscale/api/v1alpha1.py. Do not edit.\n"
    body = yaml.dump(build(), Dumper=_Dumper, sort_keys=False, width=100, allow_unicode=True)
    return header + "---\n" + body


def main(argv: list[str]) -> int:
    if argv and argv[0] in {"-h", "--help"}:
        print("usage: modelscale crd   (prints the ModelDeployment CRD YAML)")
        return 0
    if argv:
        print(f"modelscale crd: unexpected arguments {argv}", file=sys.stderr)
        return 2
    sys.stdout.write(render())
    return 0
