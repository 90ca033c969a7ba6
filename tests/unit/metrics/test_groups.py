"""How a scaling pass batches its Prometheus queries: one group per (Prometheus, backend,
latency signal), only serving pods mapped, spec overrides carried per ModelDeployment."""

from __future__ import annotations

from typing import Any

import pytest

from modelscale import podfacts
from modelscale.api.v1alpha1 import ModelDeployment
from modelscale.metrics import groups, promql
from modelscale.podfacts import PodFacts

DEFAULT = "http://prometheus.monitoring:9090"


def md(name: str, ns: str = "llm", **scaling: Any) -> ModelDeployment:
    backend = scaling.pop("backend", "vllm")
    return ModelDeployment.model_validate(
        {
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                "model": {"name": "m", "repository": "s3://b", "backend": backend},
                "scaling": scaling,
            },
        }
    )


def pod(name: str, owner: str, *, serving: bool = True, deleting: bool = False) -> PodFacts:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "llm",
        "uid": name,
        "labels": {podfacts.MD_LABEL: owner},
    }
    if deleting:
        meta["deletionTimestamp"] = "2027-01-15T08:10:00Z"
    status = str(serving)
    conditions = [
        {"type": "Ready", "status": status},
        {"type": podfacts.CONDITION_TYPE, "status": status},
    ]
    return podfacts.read({"metadata": meta, "status": {"conditions": conditions}})


@pytest.mark.parametrize(
    ("mds", "expected"),
    [
        pytest.param(
            [md(f"m{i}") for i in range(50)],
            {(DEFAULT, "vllm", "TimeToFirstToken"): 50},
            id="fifty-of-one-kind-one-group",
        ),
        pytest.param(
            [md("a"), md("b", prometheus={"url": "http://other:9090"})],
            {
                (DEFAULT, "vllm", "TimeToFirstToken"): 1,
                ("http://other:9090", "vllm", "TimeToFirstToken"): 1,
            },
            id="own-prometheus-own-group",
        ),
        pytest.param(
            [md("a"), md("b", backend="tensorrtllm")],
            {
                (DEFAULT, "vllm", "TimeToFirstToken"): 1,
                (DEFAULT, "tensorrtllm", "TimeToFirstToken"): 1,
            },
            id="backend-preset-own-group",
        ),
        pytest.param(
            [md("a"), md("b", targets={"latencySLO": {"signal": "EndToEnd"}})],
            {(DEFAULT, "vllm", "TimeToFirstToken"): 1, (DEFAULT, "vllm", "EndToEnd"): 1},
            id="latency-signal-own-group",
        ),
        pytest.param([], {}, id="nothing-to-query"),
    ],
)
def test_groups_by_prometheus_backend_and_signal(
    mds: list[ModelDeployment], expected: dict[tuple[str, str, str], int]
) -> None:
    plan = groups.plan(mds, pods_by_md={}, default_url=DEFAULT)
    assert {tuple(g.key): len(g.members) for g in plan} == expected


def test_only_serving_pods_are_measured() -> None:
    pods = {
        ("llm", "a"): [
            pod("a-1", "a"),
            pod("a-2", "a", serving=False),
            pod("a-3", "a", deleting=True),
        ],
        ("llm", "b"): [pod("b-1", "b")],
    }
    (group,) = groups.plan([md("a"), md("b")], pods_by_md=pods, default_url=DEFAULT)
    assert dict(group.owners) == {("llm", "a-1"): ("llm", "a"), ("llm", "b-1"): ("llm", "b")}


def test_overrides_timeouts_and_tpot_follow_the_members() -> None:
    mine = md(
        "a",
        prometheus={"queries": {"tokenRate": "sum(rate(my_tokens[1m]))"}, "timeoutSeconds": 7},
        targets={"timePerOutputTokenP99Seconds": 0.05},
    )
    (group,) = groups.plan(
        [mine, md("c", prometheus={"timeoutSeconds": 7})], pods_by_md={}, default_url=DEFAULT
    )
    assert dict(group.overrides) == {("llm", "a"): {promql.TOKEN_RATE: "sum(rate(my_tokens[1m]))"}}
    assert group.timeout_seconds == 7
    assert group.watch_tpot
    (plain,) = groups.plan([md("b")], pods_by_md={}, default_url=DEFAULT)
    assert not plain.overrides and not plain.watch_tpot


def test_a_longer_timeout_gets_its_own_group_so_the_others_never_wait_for_it() -> None:
    slow = md("slow", prometheus={"timeoutSeconds": 300})
    plan = groups.plan([md("a"), slow, md("b")], pods_by_md={}, default_url=DEFAULT)
    by_timeout = {g.timeout_seconds: sorted(m.name for m in g.members) for g in plan}
    assert by_timeout == {5.0: ["a", "b"], 300.0: ["slow"]}
