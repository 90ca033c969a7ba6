"""The chart's optional NetworkPolicy (rendered with the real pinned helm): only the
operator, the gateway namespaces, the model's namespace and Prometheus reach Triton's
ports, in every namespace of Triton pods; enabled without namespaces, helm says what to set."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
from tests.unit.test_chart import find, helm_template, template


def policies(*values: str) -> list[dict[str, Any]]:
    return find(template("networkPolicy.enabled=true", *values), "NetworkPolicy")


def test_off_by_default() -> None:
    assert find(template(), "NetworkPolicy") == []


def test_one_valid_policy_per_watched_namespace() -> None:
    docs = policies("watchNamespaces={team-a,team-b}", "networkPolicy.gatewayNamespaces={gw}")
    assert [d["metadata"]["namespace"] for d in docs] == ["team-a", "team-b"]
    for doc in docs:
        kubernetes_validate.validate(doc, "1.34", strict=True)
        assert doc["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/name"] == (
            "modelscale-triton"
        )
    rules = docs[0]["spec"]["ingress"]
    operator = rules[0]["from"][0]
    assert operator["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": "modelscale-system"
    }
    assert {p["port"] for p in rules[0]["ports"]} == {"http", "grpc", "metrics"}
    clients = rules[1]
    assert {p["port"] for p in clients["ports"]} == {"http", "grpc"}
    assert clients["from"][1]["namespaceSelector"]["matchExpressions"][0]["values"] == ["gw"]
    assert rules[2]["ports"] == [{"port": "metrics", "protocol": "TCP"}]


def test_explicit_namespaces_win_and_same_namespace_can_be_closed() -> None:
    docs = policies("networkPolicy.namespaces={serving}", "networkPolicy.allowSameNamespace=false")
    assert [d["metadata"]["namespace"] for d in docs] == ["serving"]
    # Only the operator and Prometheus remain.
    assert len(docs[0]["spec"]["ingress"]) == 2


def test_enabled_without_namespaces_says_what_to_set() -> None:
    proc = helm_template("networkPolicy.enabled=true")
    assert proc.returncode != 0
    assert "set networkPolicy.namespaces (or watchNamespaces)" in proc.stderr
