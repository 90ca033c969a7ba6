"""The committed field reference and `kubectl explain`: generated from the models, complete,
never stale."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import Any

from modelscale.api import crd, reference

ROOT = pathlib.Path(__file__).resolve().parents[3]
REFERENCE = ROOT / "docs" / "reference.md"


def fields(node: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every field below `node`, through nested objects, list items and map values."""
    for name, sub in node.get("properties", {}).items():
        yield f"{path}.{name}", sub
        yield from fields(sub, f"{path}.{name}")
    for key, mark in (("items", "[]"), ("additionalProperties", "{}")):
        child = node.get(key)
        if isinstance(child, dict):
            yield from fields(child, path + mark)


def test_committed_reference_is_what_the_models_generate() -> None:
    assert REFERENCE.read_text() == reference.render(), (
        "docs/reference.md is stale: run `make docs` and commit the result"
    )


def test_kubectl_explain_has_a_description_for_every_spec_field() -> None:
    spec = crd.openapi_schema()["properties"]["spec"]
    every = list(fields(spec, "spec"))
    missing = [path for path, sub in every if not sub.get("description")]
    assert len(every) > 90
    assert missing == [], f"add a docstring in api/v1alpha1.py for: {', '.join(missing)}"


def test_reference_lists_every_spec_field_with_its_default() -> None:
    text = reference.render()
    spec = crd.openapi_schema()["properties"]["spec"]
    for path, _ in fields(spec, "spec"):
        name = path.rsplit(".", 1)[-1]
        assert f"`{name}`" in text, path
    assert "| `minReplicas` | integer | `1` | ≥ 0; ≤ 10000 |" in text
    assert "| `cpu` | int or string |  | ≥ 0; a Kubernetes quantity |" in text
    assert '| `behavior` | string | `"Hold"` | one of `Hold`, `Floor` |' in text
