"""The hyperbolic fit (PolicyConfig.capacity_fit, off by default): between calm and the
knee, with TTFT calm, the capacity rises towards where 1 / P99, linear in the load (as
queueing and a filling batch make it), reaches the level given (here the knee), instead
of stopping at the heaviest load the pods were seen serving."""

from __future__ import annotations

from dataclasses import replace

import pytest

from modelscale.autoscaling import state
from modelscale.autoscaling.capacity import CapacityModel, LatencyCurve, hyperbolic_knee
from modelscale.autoscaling.types import PolicyConfig

PRIOR = 250.0  # bins of 50 tok/s (0.2 x the prior), the loads below above the prior
SLO = 2.0
KNEE = 0.9  # state.CAPACITY's knee, as a share of the SLO
# Without the twelfth split's served step, which creeps beyond loads seen at these
# pressures on its own (test_capacity_served.py): these tests read the fit alone.
FIT = replace(state.capacity_model(PolicyConfig(capacity_fit=KNEE)), served_step=None)
PLAIN = replace(state.CAPACITY, served_step=None)


def pressure(load: float, *, p0: float = 0.3, c: float = 1000.0) -> float:
    """TPOT as a share of its SLO in a replica whose latency grows like p0 / (1 - load/c)."""
    return p0 / (1.0 - load / c)


@pytest.mark.parametrize(
    ("points", "expected"),
    [
        # p = 0.3 / (1 - x/1000): 1/p = (1 - x/1000)/0.3, reaching 1/0.9 at x = 666.7;
        # each point sits at its bin's lower edge (centre - 50), so the curve's own points
        # are given at x + 50.
        pytest.param(
            [(x + 50.0, pressure(x)) for x in (150.0, 250.0, 350.0, 450.0)],
            666.67,
            id="exact-curve",
        ),
        pytest.param([(200.0, 0.5), (200.0, 0.5)], None, id="one-load-only"),
        pytest.param([(200.0, 0.5)], None, id="one-point"),
        pytest.param([(100.0, 0.6), (300.0, 0.4)], None, id="falling-with-load"),
        pytest.param([(100.0, 0.5), (300.0, 0.5)], None, id="flat"),
    ],
)
def test_the_fit_finds_the_knee_of_a_hyperbolic_curve(
    points: list[tuple[float, float]], expected: float | None
) -> None:
    knee = hyperbolic_knee(LatencyCurve(points=tuple(points), width=100.0), level=KNEE)
    if expected is None:
        assert knee is None
    else:
        assert knee == pytest.approx(expected, rel=1e-3)


def learned(model: object, *, loads: tuple[float, ...], ttft: float, rounds: int = 12) -> float:
    """Capacity after `rounds` passes over `loads`, TPOT from `pressure`, TTFT a constant
    share of its SLO."""
    m = model  # a CapacityModel
    s = m.initial(target=PRIOR)  # type: ignore[attr-defined]
    for _ in range(rounds):
        for x in loads:
            s = m.observe(  # type: ignore[attr-defined]
                s, load=x, p99=pressure(x) * SLO, target=PRIOR, slo=SLO, cliff=ttft * SLO
            )
    return float(m.capacity(s, target=PRIOR))  # type: ignore[attr-defined]


LOADS = (300.0, 350.0, 400.0, 450.0)  # TPOT 0.43-0.55 of its SLO: never calm (0.4)


def test_off_the_capacity_stops_at_the_heaviest_load_served() -> None:
    assert learned(PLAIN, loads=LOADS, ttft=0.2) == pytest.approx(450.0)


def test_on_it_rises_towards_the_fitted_knee_and_never_past_it() -> None:
    """The knee of this curve is 667 tok/s; with a probe bound of 1.5 x the heaviest safe
    bin's upper edge (750) above it, the fit decides, from bins' lower edges: below the
    true knee, never above it. With a probe of 1.0 (the default in the seventh split; 1.25
    since the eighth) the bound decides: the heaviest safe bin's upper edge, 500."""
    cap = learned(replace(FIT, probe=1.5), loads=LOADS, ttft=0.2)
    assert 550.0 < cap <= 667.0
    assert learned(replace(FIT, probe=1.0), loads=LOADS, ttft=0.2) == pytest.approx(500.0)


def test_on_it_does_not_move_while_ttft_is_near_its_cliff() -> None:
    """TTFT at 0.35 of its SLO (over the served rule's 0.3): no growth by the fit."""
    assert learned(FIT, loads=LOADS, ttft=0.35) == pytest.approx(PRIOR)


def test_the_policy_config_switch_picks_the_model() -> None:
    assert state.capacity_model(PolicyConfig()) is state.CAPACITY
    fitted = state.capacity_model(PolicyConfig(capacity_fit=KNEE))
    assert fitted.fit_level == KNEE and replace(fitted, served_step=None) == FIT
    assert state.capacity_model(PolicyConfig(adaptive=False, capacity_fit=KNEE)) is (
        state.CAPACITY_FIXED
    )


def test_the_hyperbolic_crossing_puts_the_knee_near_the_saturated_bin_not_the_calm_one() -> None:
    """`hyperbolic_crossing` (docs/policy.md, "Twentieth split"; the policy's default since
    the twenty-first round): a 1,000 tok/s prior
    (bins 200 wide) on pods that saturate near 340 tok/s. The fleet served 185 tok/s each
    calm (TTFT 0.13 s) and then 330 with one replica saturated (TTFT 12.6 s against a 2 s
    SLO). P99 linear between the two bins puts the crossing at 127 tok/s, a third of what
    the replica was serving; 1 / P99 linear puts it at 287, under the 330 served."""
    prior, slo = 1000.0, 2.0

    def capacity(model: CapacityModel) -> float:
        s = model.initial(target=prior)
        for _ in range(12):
            s = model.observe(s, load=185.0, p99=0.13, target=prior, slo=slo)
        for _ in range(12):
            s = model.observe(s, load=330.0, p99=12.6, target=prior, slo=slo)
        return model.capacity(s, target=prior)

    linear = capacity(replace(state.CAPACITY, hyperbolic_crossing=False))
    hyperbolic = capacity(state.CAPACITY)
    assert state.CAPACITY.hyperbolic_crossing is True  # frozen by the twenty-first round
    assert linear < 150.0, linear
    assert 250.0 < hyperbolic < 330.0, hyperbolic
