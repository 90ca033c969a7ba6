"""Capacity/latency model: spec fallback, learning the knee, bounded change, evidence."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import NamedTuple

import pytest

from modelscale.autoscaling.capacity import CapacityModel, CapacityState
from modelscale.autoscaling.state import CAPACITY

MODEL = CapacityModel()
TARGET = 1000.0  # spec tokensPerSecondPerReplica
SLO = 2.0


class Prior(NamedTuple):
    """A capacity model and the spec's tokensPerSecondPerReplica it starts from."""

    model: CapacityModel
    target: float


SPEC_CEILING = Prior(MODEL, TARGET)
# The learning policy's model from the API default 500 tok/s, without forgetting (a
# uniform sweep spreads the samples over every bin: as if the whole sweep were recent).
LEARNING = Prior(replace(CAPACITY, forget_every=0), 500.0)


def knee_p99(load: float, *, knee: float) -> float:
    """0.5 s until the knee, then 1 s more per 10 % of load above it (a decode knee)."""
    return 0.5 + max(load - knee, 0.0) / (0.1 * knee)


def feed(
    loads: list[float],
    *,
    knee: float,
    state: CapacityState | None = None,
    model: CapacityModel = MODEL,
    target: float = TARGET,
) -> CapacityState:
    s = state or model.initial(target=target)
    for load in loads:
        s = model.observe(s, load=load, p99=knee_p99(load, knee=knee), target=target, slo=SLO)
    return s


def sweep(lo: float, hi: float, n: int = 400) -> list[float]:
    return [lo + (hi - lo) * ((i * 37) % n) / n for i in range(n)]


def test_spec_value_until_enough_points() -> None:
    s = feed([1500.0] * (MODEL.min_points - 1), knee=500.0)
    assert MODEL.capacity(s, target=TARGET) == TARGET


@pytest.mark.parametrize(
    ("prior", "top", "knee", "low", "high"),
    [
        # The spec-as-ceiling model: SLO 2 s is crossed at knee x 1.15; the learned
        # capacity lands near it, never above the spec's 1000 tok/s.
        pytest.param(SPEC_CEILING, 1.9 * TARGET, 600.0, 620.0, 760.0, id="spec-too-optimistic"),
        pytest.param(
            SPEC_CEILING, 1.9 * TARGET, 870.0, 900.0, 1000.0, id="spec-slightly-optimistic"
        ),
        pytest.param(
            SPEC_CEILING, 1.9 * TARGET, 1300.0, 1000.0, 1000.0, id="spec-pessimistic-stays-ceiling"
        ),
        # The learning policy's model, loads swept over 0..2x the knee: the capacity lands
        # where P99 crosses 0.9 x SLO (knee x 1.13), above or below the 500 tok/s prior.
        pytest.param(LEARNING, 600.0, 300.0, 300.0, 360.0, id="prior-too-optimistic"),
        pytest.param(LEARNING, 1800.0, 900.0, 900.0, 1080.0, id="prior-pessimistic-x1.8"),
        # The bins end at 3.2x the prior (1,600 tok/s): the knee is found, the crossing
        # beyond it is not seen.
        pytest.param(LEARNING, 3000.0, 1500.0, 1400.0, 1800.0, id="prior-pessimistic-x3"),
    ],
)
def test_learns_the_load_where_p99_crosses_the_slo(
    prior: Prior, top: float, knee: float, low: float, high: float
) -> None:
    s = feed(sweep(0.0, top) * 3, knee=knee, model=prior.model, target=prior.target)
    assert low <= prior.model.capacity(s, target=prior.target) <= high
    assert len(json.dumps(prior.model.to_dict(s))) < 512


def test_capacity_moves_at_most_ten_percent_per_update() -> None:
    s = feed(sweep(0.0, 1.9 * TARGET, 100), knee=200.0)
    before = MODEL.capacity(s, target=TARGET)
    after = MODEL.capacity(feed([1800.0], knee=200.0, state=s), target=TARGET)
    assert after >= before * 0.9 - 1e-9


def test_never_above_what_was_seen_safe() -> None:
    """Only light load seen, all fast: no evidence for more than the spec. With a
    ceiling above the spec, raised only as far as loads seen safe."""
    s = feed(sweep(0.0, 400.0) * 3, knee=5000.0)
    assert MODEL.capacity(s, target=TARGET) == TARGET
    s = feed(sweep(0.0, 1400.0) * 3, knee=5000.0)
    assert MODEL.capacity(s, target=TARGET) == TARGET  # default ceiling: the spec
    lenient = CapacityModel(max_ratio=2.0)
    s = lenient.initial(target=TARGET)
    for load in sweep(0.0, 1400.0) * 3:
        s = lenient.observe(s, load=load, p99=0.5, target=TARGET, slo=SLO)
    assert TARGET < lenient.capacity(s, target=TARGET) <= 1400.0 + MODEL.bin_fraction * TARGET


def test_predicted_p99_is_monotone_in_load() -> None:
    s = feed(sweep(0.0, 1.9 * TARGET) * 3, knee=800.0)
    curve = MODEL.latency_curve(s, target=TARGET)
    predictions = [curve.p99(x) for x in range(100, 2000, 50)]
    assert all(p is not None for p in predictions)
    assert predictions == sorted(predictions)  # type: ignore[type-var]
    assert predictions[-1] > SLO  # type: ignore[operator]


def test_no_prediction_without_data() -> None:
    curve = MODEL.latency_curve(MODEL.initial(target=TARGET), target=TARGET)
    assert curve.p99(500.0) is None
    # Only heavy load seen: lighter loads are unknown, not "as slow as the heaviest".
    curve = MODEL.latency_curve(feed([1500.0] * 30, knee=500.0), target=TARGET)
    assert curve.p99(500.0) is None
    assert curve.p99(1800.0) is not None


def test_new_spec_target_resets_the_model() -> None:
    s = feed(sweep(0.0, 1.9 * TARGET) * 3, knee=600.0)
    assert MODEL.capacity(s, target=2000.0) == 2000.0


def test_state_round_trips_through_json() -> None:
    s = feed(sweep(0.0, 1.9 * TARGET) * 2, knee=900.0)
    back = MODEL.from_dict(json.loads(json.dumps(MODEL.to_dict(s))), target=TARGET)
    assert back == s
    assert len(json.dumps(MODEL.to_dict(s))) < 512


def test_a_burst_of_slow_requests_at_light_load_does_not_collapse_capacity() -> None:
    """Ten P99s of 10 s at 200 tok/s (a burst of long prompts) among a well-learned
    curve: the light-load bin is pooled with its neighbours, not made the knee."""
    s = feed(sweep(0.0, 1.9 * TARGET) * 3, knee=1300.0)
    before = MODEL.capacity(s, target=TARGET)
    for _ in range(10):
        s = MODEL.observe(s, load=200.0, p99=10.0, target=TARGET, slo=SLO)
    assert MODEL.capacity(s, target=TARGET) >= 0.95 * before


@pytest.mark.parametrize(
    ("knee", "loads", "want"),
    [
        pytest.param(150.0, sweep(0.0, 1.9 * TARGET) * 3, 0.5 * TARGET, id="floor-half-spec"),
        pytest.param(9000.0, sweep(0.0, 1.99 * TARGET) * 3, TARGET, id="ceiling-the-spec"),
    ],
)
def test_learned_capacity_stays_within_a_band_around_the_spec(
    knee: float, loads: list[float], want: float
) -> None:
    assert MODEL.capacity(feed(loads, knee=knee), target=TARGET) == pytest.approx(want)


def test_no_violation_is_invented_across_a_gap_in_the_data() -> None:
    """Seen: fast at 300 tok/s, overloaded (10 s) at 1500. At 900 nothing is known; a
    straight line between them would predict 5 s there and scale out for nothing."""
    s = MODEL.initial(target=TARGET)
    for load, p99 in [(300.0, 0.1)] * 30 + [(1500.0, 10.0)] * 30:
        s = MODEL.observe(s, load=load, p99=p99, target=TARGET, slo=SLO)
    curve = MODEL.latency_curve(s, target=TARGET)
    assert curve.p99(900.0) == pytest.approx(0.1)
    assert curve.p99(1600.0) is not None and curve.p99(1600.0) > SLO  # type: ignore[operator]
    # The capacity estimate is where the slow bin starts, not halfway.
    assert MODEL.capacity(s, target=TARGET) == pytest.approx(TARGET)


def test_the_tested_load_is_the_heaviest_bin_seen_within_the_knee() -> None:
    """Bins 100 tok/s wide (0.2 x a 500 prior): calm at 220 and 330, over the knee at 640."""
    model = CAPACITY
    prior, slo = 500.0, 2.0
    s = model.initial(target=prior)
    for load, p99 in ((220.0, 0.4), (330.0, 0.9), (640.0, 1.95)):
        for _ in range(5):
            s = model.observe(s, load=load, p99=p99, target=prior, slo=slo)
    assert model.tested_load(s, target=prior, slo=slo) == pytest.approx(350.0)
    # A stricter SLO puts the 330 bin over the knee too.
    assert model.tested_load(s, target=prior, slo=0.9) == pytest.approx(250.0)


def test_a_queueing_pod_is_read_as_saturated_near_its_load_when_asked() -> None:
    """`saturated_edge` (3.0 in the policy's model since the thirty-third round): one pod
    serves 350 tok/s while its queue grows and its P99 climbs from 7 s to 24 s (2 s SLO).
    Scaling the load by SLO / P99 walks the estimate down by `max_change` a pass, far
    below the load the pod serves; with the rule the estimate stays at the lower edge of
    the pod's bin (300-400 tok/s on a 500 tok/s prior), where a queueing pod saturates."""
    assert CAPACITY.saturated_edge == 3.0  # frozen by the round
    model = replace(CAPACITY, forget_every=0, saturated_edge=None)

    def after(m: CapacityModel) -> float:
        s = m.initial(target=500.0)
        for i in range(12):
            s = m.observe(s, load=350.0, p99=7.0 + 1.5 * i, target=500.0, slo=SLO)
        return m.capacity(s, target=500.0)

    assert after(model) < 200.0
    assert after(replace(model, saturated_edge=1.0)) == pytest.approx(300.0)
    # A P99 just past the knee is not a queue: the SLO / P99 scaling stands under 3.
    mild = replace(model, saturated_edge=3.0)
    s = mild.initial(target=500.0)
    for _ in range(12):
        s = mild.observe(s, load=350.0, p99=2.4, target=500.0, slo=SLO)
    assert mild.capacity(s, target=500.0) < 300.0


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        pytest.param({}, 1.86, id="default-moves-alpha-from-the-old-value"),
        pytest.param({"restart_below": 3}, 0.9, id="restarted-below-three"),
        pytest.param({"restart_below": 2}, 1.86, id="count-not-below-two"),
        pytest.param({"count_weighted": True}, 1.7, id="running-mean-of-what-is-left"),
    ],
)
def test_a_forgotten_bin_weighs_its_old_value_as_its_count_says(
    fields: dict[str, object], expected: float
) -> None:
    """The thirty-fifth round's second round (off by default): a bin held P99 2.1 and
    forgetting halved its count to 2 (out of the fit). A new sample at 0.9 moves it by
    alpha (0.2) by default; with `restart_below` 3 it replaces it; with `count_weighted`
    it moves it by 1 / (2 + 1)."""
    model = replace(MODEL, **fields)  # type: ignore[arg-type]
    width = TARGET * model.bin_fraction
    fresh = model.initial(target=TARGET)
    p99 = list(fresh.p99)
    n = list(fresh.n)
    p99[4], n[4] = 2.1, 2
    before = replace(fresh, p99=tuple(p99), n=tuple(n), total=30)
    after = model.observe(before, load=4.5 * width, p99=0.9, target=TARGET, slo=SLO)
    assert after.p99[4] == pytest.approx(expected)
    assert after.n[4] == 3
