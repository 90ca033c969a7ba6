"""The generated CRD: committed copies are fresh, the schema is structural (what the
apiserver demands), and the subresources, columns and CEL rules a user relies on exist."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from modelscale.api import crd, v1alpha1

ROOT = Path(__file__).resolve().parents[3]
COMMITTED = [
    ROOT / "crds" / "modeldeployments.modelscale.dev.yaml",
    ROOT / "charts" / "modelscale" / "files" / "crds" / "modeldeployments.modelscale.dev.yaml",
]


def schema() -> dict[str, Any]:
    version = crd.build()["spec"]["versions"][0]
    result: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return result


def nodes(node: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    found = [(path, node)]
    for name, sub in node.get("properties", {}).items():
        found += nodes(sub, f"{path}.{name}")
    if isinstance(node.get("additionalProperties"), dict):
        found += nodes(node["additionalProperties"], f"{path}.*")
    if "items" in node:
        found += nodes(node["items"], f"{path}[]")
    return found


@pytest.mark.parametrize("path", [pytest.param(p, id=p.parent.parent.name) for p in COMMITTED])
def test_committed_crd_equals_a_fresh_generation(path: Path) -> None:
    assert path.read_text() == crd.render(), f"{path} is stale: run `make crds`"


def test_render_is_deterministic_and_main_prints_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert crd.main([]) == 0
    assert capsys.readouterr().out == crd.render() == crd.render()


@pytest.mark.parametrize(
    ("rule", "check"),
    [
        pytest.param("no $ref", lambda n: "$ref" not in n and "$defs" not in n, id="no-refs"),
        pytest.param(
            "no anyOf/oneOf", lambda n: "anyOf" not in n and "oneOf" not in n, id="no-anyof"
        ),
        pytest.param(
            "every node has a type",
            lambda n: (
                "type" in n
                or n.get("x-kubernetes-int-or-string")
                or n.get("x-kubernetes-preserve-unknown-fields")
            ),
            id="typed",
        ),
        pytest.param(
            "properties and additionalProperties exclusive",
            lambda n: not ("properties" in n and "additionalProperties" in n),
            id="props-xor-additional",
        ),
        pytest.param(
            "no nullable default", lambda n: n.get("default", 0) is not None, id="no-null-default"
        ),
        pytest.param(
            "OpenAPI 3.0 exclusiveMinimum",
            lambda n: isinstance(n.get("exclusiveMinimum", True), bool),
            id="exclusive-bool",
        ),
        pytest.param("no title", lambda n: "title" not in n, id="no-title"),
    ],
)
def test_schema_is_structural(rule: str, check: Any) -> None:
    bad = [path for path, node in nodes(schema()) if not check(node)]
    assert not bad, f"{rule}: {bad}"


def test_status_has_no_defaults_and_an_omitted_spec_block_defaults_to_the_model_defaults() -> None:
    status = schema()["properties"]["status"]
    assert [p for p, n in nodes(status) if "default" in n] == []
    spec = schema()["properties"]["spec"]["properties"]
    # What the apiserver stores for an omitted block is what the operator would assume.
    for block, model in [
        ("scaling", v1alpha1.Scaling),
        ("warmUp", v1alpha1.WarmUp),
        ("server", v1alpha1.Server),
        ("placement", v1alpha1.Placement),
        ("disruption", v1alpha1.Disruption),
    ]:
        assert model.model_validate(spec[block]["default"]) == model()


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        pytest.param(".spec.server.gpus", {"minimum": 0}, id="gpus>=0"),
        pytest.param(
            ".spec.scaling.mode",
            {"enum": ["Predictive", "RecommendOnly", "External"]},
            id="mode-enum",
        ),
        pytest.param(
            ".spec.scaling.prometheus.timeoutSeconds",
            {"minimum": 0, "exclusiveMinimum": True},
            id="timeout>0",
        ),
        pytest.param(
            ".spec.scaling.targets.headroom",
            {"minimum": 0.01, "exclusiveMinimum": None, "maximum": 1},
            id="headroom",
        ),
        pytest.param(
            ".spec.disruption.maxUnavailable",
            {"x-kubernetes-int-or-string": True, "default": 1},
            id="int-or-string",
        ),
        pytest.param(
            ".spec.server.nodeSelector",
            {
                "type": "object",
                "additionalProperties": {
                    "type": "string",
                    "maxLength": 63,
                    "pattern": v1alpha1.LABEL_VALUE_PATTERN,
                },
            },
            id="map",
        ),
        pytest.param(
            ".spec.server.tolerations",
            {"items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
            id="opaque-list",
        ),
        pytest.param(
            ".status.autoscaling.state",
            {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            id="free-state",
        ),
        pytest.param(".status.autoscaling.learnedState", {"type": "string"}, id="state-as-text"),
        pytest.param(".status.autoscaling.decisions", {"maxItems": 10}, id="last-10"),
        pytest.param(
            ".status.kopf",
            {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            id="kopf-state-kept",
        ),
        pytest.param(
            ".spec.server.env",
            {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
            id="env-map",
        ),
        pytest.param(
            ".status.conditions",
            {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
            id="conditions-map",
        ),
    ],
)
def test_field_constraints(path: str, expected: dict[str, Any]) -> None:
    node = dict(nodes(schema()))[path]
    assert {k: node.get(k) for k in expected} == expected


@pytest.mark.parametrize(
    ("path", "message"),
    [
        pytest.param("." + ".".join(filter(None, ("spec", p))), m, id=m[:40])
        for p, _, m in v1alpha1.SPEC_RULES
    ],
)
def test_cross_field_rules_are_cel_with_the_user_message(path: str, message: str) -> None:
    node = dict(nodes(schema()))[path]
    assert message in [v["message"] for v in node["x-kubernetes-validations"]]


def test_subresources_names_and_printer_columns() -> None:
    spec = crd.build()["spec"]
    version = spec["versions"][0]
    assert version["subresources"] == {
        "status": {},
        "scale": {
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.selector",
        },
    }
    columns = [c["name"] for c in version["additionalPrinterColumns"] if not c.get("priority")]
    assert columns == [
        "Ready", "Warmed", "Replicas", "Desired", "Tokens/s", "P99", "SLO", "Mode", "Reason", "Age"
    ]  # fmt: skip
    assert spec["names"]["shortNames"] == ["mdep"]
    assert spec["names"]["categories"] == ["modelscale", "ai"]
    # Every column's path exists in the schema (a typo would show an empty column forever).
    paths = dict(nodes(schema()))
    for column in version["additionalPrinterColumns"]:
        if column["jsonPath"] == crd.READY_PATH:
            assert ".status.conditions" in paths
        elif not column["jsonPath"].startswith(".metadata"):
            assert column["jsonPath"] in paths, column


def test_crd_object_validates_against_kubernetes_1_34() -> None:
    loaded = yaml.safe_load(crd.render())
    kubernetes_validate.validate(loaded, "1.34", strict=True)
