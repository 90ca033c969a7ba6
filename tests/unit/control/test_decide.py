"""The decision per ModelDeployment: spec, pods (read once), Prometheus signals and `now`
in; recommendation, state and observation out. No cluster, no Prometheus."""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import pytest

from modelscale import podfacts
from modelscale.api.v1alpha1 import ModelDeployment
from modelscale.autoscaling import recommender
from modelscale.autoscaling.types import Observation
from modelscale.control import scaling
from modelscale.control.decide import decide
from modelscale.metrics import promql
from modelscale.metrics.promql import Signals
from modelscale.podfacts import PodFacts

NOW = 1_800_000_000.0


def md(**spec: Any) -> ModelDeployment:
    return ModelDeployment.model_validate(
        {
            "metadata": {"name": "llama", "namespace": "llm", "generation": 1},
            "spec": {
                "model": {"name": "m", "repository": "s3://b"},
                "minReplicas": 1,
                "maxReplicas": 8,
                **spec,
            },
        }
    )


def pod(
    name: str, *, warmed: bool = True, deleting: bool = False, seconds_to_warm: float | None = None
) -> PodFacts:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "llm",
        "uid": f"uid-{name}",
        "labels": {podfacts.MD_LABEL: "llama"},
        "creationTimestamp": "2027-01-15T08:00:00Z",
        "annotations": {},
    }
    if seconds_to_warm is not None:
        meta["annotations"][podfacts.ANNOTATION_SECONDS_TO_WARM] = str(seconds_to_warm)
    if deleting:
        meta["deletionTimestamp"] = "2027-01-15T08:10:00Z"
    conditions = [
        {"type": "Ready", "status": str(warmed)},
        {"type": "ContainersReady", "status": "True"},
        {"type": podfacts.CONDITION_TYPE, "status": str(warmed)},
    ]
    return podfacts.read(
        {"metadata": meta, "status": {"podIP": "198.18.0.9", "conditions": conditions}}
    )


class Expect(NamedTuple):
    replicas: int
    reason: str
    warmed: int  # replicas that count as capacity
    horizon: float | None  # measured start-up time handed to the policy
    acts: bool  # the scaling loop would change the Deployment


def fresh(token_rate: float, *, reporting: int = 2, p99: float | None = 1.2) -> Signals:
    # P99 at 60 % of the 2 s SLO: neither calm nor busy, so the learning policy keeps the
    # spec's capacity prior and the replica counts below follow from it alone.
    return Signals(
        token_rate=token_rate,
        p99_seconds=p99,
        queue_depth=0.0,
        sample_time=NOW - 2,
        pods_reporting=reporting,
    )


@pytest.mark.parametrize(
    ("spec", "signals", "pods", "current", "expect"),
    [
        pytest.param(
            {},
            Signals(),
            [pod("a")],
            2,
            Expect(2, "MetricsMissing", warmed=1, horizon=None, acts=False),
            id="no-metrics-hold",
        ),
        pytest.param(
            {},
            fresh(3000.0),
            [pod("a", seconds_to_warm=40), pod("b", seconds_to_warm=60)],
            2,
            Expect(8, "ForecastTokenRate", warmed=2, horizon=50.0, acts=True),
            id="demand-up-measured-horizon",
        ),
        pytest.param(
            {"scaling": {"forecast": {"useMeasuredHorizon": False}}},
            fresh(3000.0),
            [pod("a", seconds_to_warm=40)],
            2,
            Expect(8, "ForecastTokenRate", warmed=1, horizon=None, acts=True),
            id="measured-horizon-off",
        ),
        pytest.param(
            {},
            fresh(100.0),
            [pod("a"), pod("b"), pod("c", deleting=True)],
            3,
            Expect(3, "ScaleDownStabilizing", warmed=2, horizon=None, acts=False),
            id="terminating-pod-is-not-capacity",
        ),
        pytest.param(
            {},
            fresh(3000.0),
            [pod("a"), pod("b", warmed=False)],
            2,
            Expect(8, "ForecastTokenRate", warmed=1, horizon=None, acts=True),
            id="warming-pod-is-not-capacity",
        ),
        pytest.param(
            {"scaling": {"mode": "RecommendOnly"}},
            fresh(3000.0),
            [pod("a")],
            2,
            Expect(8, "ForecastTokenRate", warmed=1, horizon=None, acts=False),
            id="recommend-only-does-not-act",
        ),
    ],
)
def test_decision_per_modeldeployment(
    spec: dict[str, Any],
    signals: Signals,
    pods: list[PodFacts],
    current: int,
    expect: Expect,
) -> None:
    m = md(**spec)
    decision = decide(m, signals=signals, pods=pods, current=current, now=NOW)
    rec, obs = decision.recommendation, decision.observation
    assert (rec.replicas, rec.reason) == (expect.replicas, expect.reason)
    assert obs.warmed_replicas == expect.warmed and obs.current_replicas == current
    assert obs.measured_horizon_seconds == expect.horizon
    assert scaling.should_actuate(m, rec, current=current) is expect.acts
    # The state carries the decision, so a restarted operator continues from it.
    assert decision.state.decisions[-1].replicas == rec.replicas


NO_WINDOW = {"scaling": {"scaleDown": {"stabilizationWindowSeconds": 0}}}
TWO = [pod("a"), pod("b")]


@pytest.mark.parametrize(
    ("signals", "current", "replicas", "reason", "says"),
    [
        pytest.param(fresh(100.0), 3, 2, "ForecastTokenRate", "", id="complete-data-scales-down"),
        pytest.param(
            fresh(100.0, reporting=1),
            3,
            3,
            "MetricsPartial",
            "only 1 of 2 warmed pods have metrics",
            id="a-pod-not-scraped-holds",
        ),
        pytest.param(
            fresh(100.0, p99=None),
            3,
            3,
            "MetricsPartial",
            "the P99 latency is missing",
            id="p99-missing-while-tokens-flow-holds",
        ),
        pytest.param(
            fresh(0.0, p99=None),
            3,
            3,  # zero demand, not yet for two horizons: held through the silence, not partial
            "ScaleDownStabilizing",
            "through a silence",
            id="no-traffic-no-p99-is-a-silence-not-partial-data",
        ),
        pytest.param(
            dataclasses.replace(
                fresh(100.0), problems=("latency_p99: pod a has a bucket le='abc'",)
            ),
            3,
            3,
            "MetricsPartial",
            "le='abc'",
            id="refused-series-holds-and-says-which",
        ),
        pytest.param(
            fresh(3000.0, reporting=1),
            2,
            8,
            "ForecastTokenRate",
            "",
            id="partial-data-still-scales-up",
        ),
    ],
)
def test_no_scale_down_on_partial_data(
    signals: Signals, current: int, replicas: int, reason: str, says: str
) -> None:
    rec = decide(md(**NO_WINDOW), signals=signals, pods=TWO, current=current, now=NOW)
    assert (rec.recommendation.replicas, rec.recommendation.reason) == (replicas, reason)
    assert says in rec.recommendation.message


def test_an_overridden_token_rate_does_not_need_the_preset_per_pod_series() -> None:
    signals = dataclasses.replace(
        fresh(100.0, reporting=0), sources={promql.TOKEN_RATE: "override"}
    )
    rec = decide(md(**NO_WINDOW), signals=signals, pods=TWO, current=3, now=NOW)
    assert rec.recommendation.replicas == 2


def test_history_seeds_a_forecaster_that_learned_nothing() -> None:
    m = md()
    history = [(NOW - 600 + 60 * i, 400.0 + 50 * i) for i in range(10)]
    cold = decide(m, signals=fresh(900.0), pods=[pod("a")], current=1, now=NOW)
    seeded = decide(m, signals=fresh(900.0), pods=[pod("a")], current=1, now=NOW, history=history)
    assert seeded.state.model != cold.state.model


def on_node(name: str, node: str, *, ready_nodes: frozenset[str]) -> PodFacts:
    conditions = [
        {"type": "Ready", "status": "True"},
        {"type": "ContainersReady", "status": "True"},
        {"type": podfacts.CONDITION_TYPE, "status": "True"},
    ]
    body = {
        "metadata": {
            "name": name,
            "namespace": "llm",
            "uid": name,
            "labels": {podfacts.MD_LABEL: "llama"},
        },
        "spec": {"nodeName": node},
        "status": {"podIP": "198.18.0.9", "conditions": conditions},
    }
    return podfacts.read(body, ready_nodes=ready_nodes)


@pytest.mark.parametrize(
    ("token_rate", "max_replicas", "replicas", "says"),
    [
        # The policy wants 3 for 1100 tok/s, 2 warmed pods are left: 3 + 1 for the lost one.
        pytest.param(1100.0, 8, 4, "1 replica(s) added for them", id="replacement-starts-now"),
        # 2 suffice for 600 tok/s: 2 + 1 = the 3 running, nothing to change.
        pytest.param(600.0, 8, 3, "1 replica(s) added for them", id="the-others-suffice"),
        pytest.param(1100.0, 3, 3, "maxReplicas leaves no room", id="at-max-replicas"),
    ],
)
def test_a_pod_on_a_notready_node_stops_counting_at_once(
    token_rate: float, max_replicas: int, replicas: int, says: str
) -> None:
    # The Pod's own Ready condition is still True: the node's is what went.
    ready = frozenset({"n1", "n2"})
    pods = [on_node(f"p{i}", f"n{i}", ready_nodes=ready) for i in (1, 2, 3)]
    assert [p.node_ready for p in pods] == [True, True, False]
    m = md(maxReplicas=max_replicas, **NO_WINDOW)
    got = decide(m, signals=fresh(token_rate), pods=pods, current=3, now=NOW)
    assert got.observation.warmed_replicas == 2
    assert got.recommendation.replicas == replicas
    assert says in got.recommendation.message and "p3 on n3" in got.recommendation.message


def test_the_simulator_without_completeness_tracking_is_not_held() -> None:
    m = md(**NO_WINDOW)
    obs = Observation(
        now=NOW,
        token_rate=100.0,
        p99_seconds=None,  # no request finished in the window: the simulator's, not partial
        queue_depth=0.0,
        sample_time=NOW - 2,
        warmed_replicas=3,
        current_replicas=3,
    )
    rec, _ = recommender.recommend(
        obs, config=scaling.policy_config(m.spec), state=scaling.previous_state(m)
    )
    assert rec.reason != "MetricsPartial" and rec.replicas < 3
