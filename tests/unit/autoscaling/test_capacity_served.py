"""The served rule: a load per replica served with TPOT well within its SLO (gradual; by
default under 0.6 of it, `state.CAPACITY.served_below`) and TTFT far from its cliff
raises the capacity to that load, where the calm rule (every signal under 0.4 of its SLO)
left it at the prior."""

from __future__ import annotations

from dataclasses import replace

import pytest
from test_policy_learning import CONFIG, T0, obs

from modelscale.autoscaling import recommender, state
from modelscale.autoscaling.capacity import CapacityModel
from modelscale.autoscaling.types import ScalingState

PRIOR = 500.0  # the API default tokensPerSecondPerReplica
SLO = 2.0  # TTFT; every pressure below is in these units (share x SLO)
# The served rule alone: since the twelfth split the defaults also creep up from a served
# sample (`served_step`, tested at the end of this file).
MODEL = replace(state.CAPACITY, served_step=None)


def learned(
    *, load: float, worst: float, cliff: float | None, n: int = 1, model: CapacityModel = MODEL
) -> float:
    m = model
    s = m.initial(target=PRIOR)
    for _ in range(n):
        s = m.observe(s, load=load, p99=worst * SLO, target=PRIOR, slo=SLO, cliff=cliff)
    return m.capacity(s, target=PRIOR)


@pytest.mark.parametrize("n", [1, 30], ids=["first-sample", "after-min-points"])
def test_a_load_served_at_tpot_0_55_with_ttft_far_from_its_cliff_is_the_capacity(n: int) -> None:
    """650 tok/s per pod at TPOT 0.55 of its SLO and TTFT 0.25 of its."""
    assert learned(load=650.0, worst=0.55, cliff=0.25 * SLO, n=n) == pytest.approx(650.0)


def test_the_served_rule_raises_the_capacity_to_the_load_never_past_it() -> None:
    """Where a calm sample may probe beyond the heaviest load (here with a probe of 1.5;
    the default is 1.0), a served one gives its own load only: TPOT at 0.55 leaves
    little room above it."""
    probing = replace(MODEL, probe=1.5)
    assert learned(load=650.0, worst=0.55, cliff=0.25 * SLO, n=30, model=probing) < 1.05 * 650.0
    assert learned(load=650.0, worst=0.3, cliff=0.25 * SLO, n=30, model=probing) > 1.2 * 650.0


@pytest.mark.parametrize(
    ("worst", "cliff"),
    [
        pytest.param(0.65, 0.25, id="worst-over-0.6-of-its-slo"),
        pytest.param(0.55, 0.35, id="ttft-nearer-its-cliff"),
        pytest.param(0.55, None, id="one-signal-is-both"),
    ],
)
def test_no_served_evidence_nearer_the_knee_or_the_cliff(worst: float, cliff: float | None) -> None:
    """TTFT over 0.3 of its SLO, or any signal over 0.6: the prior stands (one signal
    only, as without a TPOT SLO, is its own cliff signal)."""
    c = None if cliff is None else cliff * SLO
    assert learned(load=650.0, worst=worst, cliff=c) == pytest.approx(PRIOR)


def test_the_policy_learns_the_served_load_from_ttft_and_tpot_and_asks_for_fewer() -> None:
    """Two warmed pods serving 650 tok/s each for three minutes, TTFT at 0.25 of its 2 s
    SLO and TPOT at 0.055 s of its 0.1 s: the capacity becomes 650, so 1,300 tok/s needs 2
    replicas, not the 4 the 500 tok/s prior x headroom 0.8 asks for."""
    config = replace(CONFIG, tpot_slo_seconds=0.1)
    s = ScalingState()
    rec = None
    for i in range(13):
        t = T0 + 15.0 * i
        rec, s = recommender.recommend(
            obs(t, rate=1300.0, replicas=2, p99=0.5, p99_tpot_seconds=0.055), config=config, state=s
        )
    assert rec is not None
    m = state.load(s.model, config=config)
    # At least the load served; the defaults' served step creeps on from there (2 % a
    # sample while the pods stay served).
    assert 650.0 <= state.CAPACITY.capacity(m.cap, target=PRIOR) <= 1.2 * 650.0
    assert rec.replicas == 2, rec.message


def test_the_calm_step_learns_a_capacity_far_above_the_prior_from_a_fleet_sized_by_it() -> None:
    """The fleet runs at 0.75 of whatever capacity it has learned, always calm (TPOT 0.25
    of its SLO, TTFT 0.1): with probe 1.0 the capacity never leaves the 500 tok/s prior,
    since no load above it is ever seen; a calm step of 5 % per sample climbs, and the
    defaults' 2 % (docs/policy.md, "Ninth split") too."""
    still = replace(MODEL, calm_step=None)
    stepping = replace(MODEL, calm_step=0.05)
    defaults = state.CAPACITY
    cases = ((still, 499.0, 501.0), (stepping, 1000.0, 4 * PRIOR), (defaults, 1000.0, 4 * PRIOR))
    for model, low, high in cases:
        s = model.initial(target=PRIOR)
        for _ in range(60):
            load = 0.75 * model.capacity(s, target=PRIOR)
            s = model.observe(s, load=load, p99=0.25 * SLO, target=PRIOR, slo=SLO, cliff=0.1 * SLO)
        assert low <= model.capacity(s, target=PRIOR) <= high


def test_the_calm_step_stops_when_the_pods_are_not_calm_and_a_busy_sample_lowers_it() -> None:
    stepping = replace(MODEL, calm_step=0.05)
    s = stepping.initial(target=PRIOR)
    for _ in range(30):  # calm at 400 tok/s: the capacity climbs past it
        s = stepping.observe(s, load=400.0, p99=0.25 * SLO, target=PRIOR, slo=SLO)
    climbed = stepping.capacity(s, target=PRIOR)
    assert climbed > 600.0
    for _ in range(10):  # no longer calm (0.6 of the SLO), not busy: it holds
        s = stepping.observe(s, load=600.0, p99=0.6 * SLO, target=PRIOR, slo=SLO)
    held = stepping.capacity(s, target=PRIOR)
    assert held <= climbed * 1.001
    s = stepping.observe(s, load=650.0, p99=1.0 * SLO, target=PRIOR, slo=SLO)  # busy
    assert stepping.capacity(s, target=PRIOR) <= 650.0


def test_the_served_step_learns_what_pods_serve_between_the_calm_and_served_rules() -> None:
    """`served_step` (docs/policy.md, "Twelfth split", H7): servegen-m-large-d11-night's
    pods ran at 0.75-0.85 of a learned 672 tok/s with TPOT at 0.45 of its SLO and TTFT at
    0.35 of its: neither calm (0.4) nor served (TTFT under 0.3), so the capacity never
    moved. With the served step it creeps up while the pods stay served, and stops where
    they no longer are (here TPOT passes 0.6 beyond 900 tok/s, and the fleet runs at 0.8
    of the estimate)."""
    plain = replace(MODEL, served_step=None)
    stepping = replace(MODEL, served_step=0.02)

    def tpot(load: float) -> float:  # 0.42 up to 500 tok/s, 0.6 at 900
        return 0.42 + 0.18 * max(0.0, load - 500.0) / 400.0

    for model, low, high in ((plain, 499.0, 501.0), (stepping, 1000.0, 1150.0)):
        s = model.initial(target=PRIOR)
        for _ in range(200):
            load = 0.8 * model.capacity(s, target=PRIOR)
            s = model.observe(
                s, load=load, p99=tpot(load) * SLO, target=PRIOR, slo=SLO, cliff=0.35 * SLO
            )
        assert low <= model.capacity(s, target=PRIOR) <= high


@pytest.mark.parametrize(
    ("load", "worst", "cliff"),
    [
        pytest.param(450.0, 0.45, 0.35, id="a-light-fleet-does-not-creep"),
        pytest.param(600.0, 0.65, 0.35, id="worst-over-0.6"),
        pytest.param(600.0, 0.45, 0.45, id="ttft-over-0.4"),
    ],
)
def test_no_served_step_on_a_light_fleet_or_nearer_the_knee_or_the_cliff(
    load: float, worst: float, cliff: float
) -> None:
    """Only a fleet running at 0.7 of its estimate or more, with every P99 inside the
    looser served rule, creeps up: a night's single replica at a tenth of its capacity
    must not learn a capacity it never showed."""
    stepping = replace(MODEL, served_step=0.02)
    s = stepping.initial(target=PRIOR)
    for _ in range(8):  # served at 640 tok/s: the capacity is 640
        s = stepping.observe(s, load=640.0, p99=0.5 * SLO, target=PRIOR, slo=SLO, cliff=0.2 * SLO)
    start = stepping.capacity(s, target=PRIOR)
    for _ in range(30):
        s = stepping.observe(
            s, load=load, p99=worst * SLO, target=PRIOR, slo=SLO, cliff=cliff * SLO
        )
    assert stepping.capacity(s, target=PRIOR) <= start * 1.001


def test_step_reach_stops_the_creep_at_a_multiple_of_the_heaviest_load_seen() -> None:
    """`step_reach` (docs/policy.md, "Seventeenth split"; 2.0 by default since the
    eighteenth): servegen-m-small-d6-pm's pods served about 250 tok/s each, calm (TPOT
    0.37 of its SLO), and the unbounded calm step carried the estimate to 728, three times
    that load, where one replica fewer then saturated. Bounded at R x the heaviest load
    the curve shows within the knee, the steps never raise it past that, and the bound
    lowers nothing (the 500 prior stands), while the unbounded model climbs on."""
    unbounded = replace(state.CAPACITY, step_reach=None)
    assert state.CAPACITY.step_reach == 2.0
    for load in (250.0, 400.0):
        results = {}
        for name, model in (
            ("unbounded", unbounded),
            ("1.5", replace(state.CAPACITY, step_reach=1.5)),
            ("2.0", state.CAPACITY),
        ):
            s = model.initial(target=PRIOR)
            for _ in range(60):
                s = model.observe(s, load=load, p99=0.37 * SLO, target=PRIOR, slo=SLO, cliff=0.04)
            results[name] = model.capacity(s, target=PRIOR)
        tested = state.CAPACITY.tested_load(s, target=PRIOR, slo=SLO)
        assert tested is not None and load <= tested <= load + 100.0  # a bin's centre
        assert results["unbounded"] > 3.0 * load, results
        for reach in (1.5, 2.0):
            assert PRIOR <= results[f"{reach}"] <= max(PRIOR, reach * tested) + 1e-6, (
                results,
                tested,
            )
            assert results[f"{reach}"] < results["unbounded"], results
