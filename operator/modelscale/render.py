"""`modelscale render -f md.yaml`: the Deployment, Service and PodDisruptionBudget the operator
would apply for each ModelDeployment in a file, as multi-document YAML (like `helm template`),
for GitOps reviews and CI. Nothing is read from or sent to a cluster.

The children are built by the same pure builders the operator applies (resources/), from the
spec parsed by the same pydantic model, so a spec the operator would refuse fails here with
the same field path. What only a live ModelDeployment gives is left out: the owner reference
(it needs the ModelDeployment's `uid`, set by the apiserver; without it the objects would not
validate) and, in Predictive mode, a replica count the autoscaler decides later (the
Deployment shows the count the operator starts with).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import ValidationError

from modelscale.api import v1alpha1
from modelscale.api.v1alpha1 import ModelDeployment
from modelscale.control import replicas, validation
from modelscale.resources import deployment, pdb, service


class RenderError(ValueError):
    """A file that cannot be rendered; the message is one line that says what to fix."""


@dataclass(frozen=True)
class Rendered:
    source: str  # "FILE: NAMESPACE/NAME"
    objects: list[dict[str, Any]]


def children(md: ModelDeployment) -> list[dict[str, Any]]:
    """What a first reconcile of `md` applies: Deployment, Service, PodDisruptionBudget."""
    choice = replicas.choose(md.spec, status_desired=None, running=None)
    objects = [deployment.build(md, replicas=choice.replicas), service.build(md), pdb.build(md)]
    for obj in objects:
        obj["metadata"].pop("ownerReferences", None)  # needs the live object's uid
    return objects


def parse(doc: Any, *, source: str, namespace: str | None) -> ModelDeployment:
    """One YAML document -> a valid ModelDeployment, or a RenderError naming the field."""
    if not isinstance(doc, dict):
        raise RenderError(f"{source}: not a Kubernetes object (a YAML mapping)")
    obj = dict(doc)
    meta = dict(obj.get("metadata") or {})
    if not meta.get("name"):
        raise RenderError(f"{source}: metadata.name: Field required")
    if namespace is not None and not meta.get("namespace"):
        meta["namespace"] = namespace
    obj["metadata"] = meta
    try:
        return ModelDeployment.model_validate(obj)
    except ValidationError as err:
        raise RenderError(f"{source}: {validation.short(err)}") from err


def is_modeldeployment(doc: Any) -> bool:
    return (
        isinstance(doc, dict)
        and doc.get("kind") == v1alpha1.KIND
        and str(doc.get("apiVersion", "")).split("/")[0] == v1alpha1.GROUP
    )


def render_text(text: str, *, filename: str, namespace: str | None = None) -> list[Rendered]:
    """Every ModelDeployment in `text` (other kinds, e.g. a ConfigMap, are skipped)."""
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise RenderError(f"{filename}: not valid YAML{where}: {problem}") from err
    out = []
    for index, doc in enumerate(docs):
        if not is_modeldeployment(doc):
            if isinstance(doc, dict) and doc.get("kind") == v1alpha1.KIND:
                raise RenderError(
                    f"{filename}: document {index + 1}: apiVersion must be "
                    f"{v1alpha1.API_VERSION}, not {doc.get('apiVersion')!r}"
                )
            continue
        md = parse(doc, source=f"{filename}: document {index + 1}", namespace=namespace)
        out.append(Rendered(f"{filename}: {md.namespace}/{md.name}", children(md)))
    if not out:
        raise RenderError(f"{filename}: no {v1alpha1.KIND} ({v1alpha1.API_VERSION}) in the file")
    return out


def to_yaml(rendered: Iterable[Rendered]) -> str:
    parts = []
    for item in rendered:
        for obj in item.objects:
            parts.append(
                f"---\n# Source: {item.source}\n"
                + yaml.safe_dump(obj, sort_keys=False, default_flow_style=False)
            )
    return "".join(parts)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="modelscale render",
        description="print the Deployment, Service and PodDisruptionBudget the operator "
        "would apply for the ModelDeployments in FILE (multi-document YAML)",
    )
    parser.add_argument(
        "-f",
        "--filename",
        action="append",
        required=True,
        metavar="FILE",
        help="file holding one or more ModelDeployments ('-' for stdin); repeatable",
    )
    parser.add_argument(
        "-n",
        "--namespace",
        default=None,
        help="namespace of ModelDeployments that set none (default: default, as kubectl)",
    )
    args = parser.parse_args(argv)
    rendered: list[Rendered] = []
    try:
        for filename in args.filename:
            if filename == "-":
                text = sys.stdin.read()
            else:
                try:
                    with open(filename, encoding="utf-8") as handle:
                        text = handle.read()
                except OSError as err:
                    raise RenderError(f"{filename}: cannot read: {err.strerror}") from err
            rendered += render_text(text, filename=filename, namespace=args.namespace)
    except RenderError as err:
        print(f"modelscale render: {err}", file=sys.stderr)
        return 1
    sys.stdout.write(to_yaml(rendered))
    return 0
