"""The anchored bound (`CapacityModel.anchored`, docs/policy.md "Ninth split", H1): a P99
between the served rule and the knee bounds the capacity by the load where 1 / P99,
falling linearly from 1 / (the lightest P99 seen), reaches the knee, also when every
sample falls in one bin and no slope can be fitted."""

from __future__ import annotations

from dataclasses import replace

import pytest

from modelscale.autoscaling import state
from modelscale.autoscaling.capacity import CapacityModel, CapacityState

PRIOR = 500.0
SLO = 2.0
CALM_TTFT = 0.05 * SLO  # TTFT far from its cliff: only TPOT rises
# The rule alone: the defaults also step the capacity up while calm (`calm_step`).
PLAIN = replace(state.CAPACITY, anchored=None, calm_step=None)
ANCHORED = replace(PLAIN, anchored=state.CAPACITY.knee)


def run(model: CapacityModel, phases: list[tuple[float, float, int]]) -> CapacityState:
    """Each phase: (load per replica, worst P99 as a share of the SLO, samples)."""
    s = model.initial(target=PRIOR)
    for load, worst, n in phases:
        for _ in range(n):
            s = model.observe(s, load=load, p99=worst * SLO, target=PRIOR, slo=SLO, cliff=CALM_TTFT)
    return s


def bound(load: float, low: float, p99: float, knee: float = state.CAPACITY.knee) -> float:
    x = 1.0 / low
    return load * (x - 1.0 / knee) / (x - 1.0 / p99)


def test_a_pressure_rising_in_one_bin_lowers_a_prior_the_pods_cannot_reach() -> None:
    """servegen-m-small-d10's shape: two pods at ~240 tok/s each, P99 TPOT 0.45 of its SLO,
    then 0.7 at the same load (longer prompts). All samples fall in one bin, so no slope
    can be fitted and the prior of 500 stands without the bound; with it, the capacity
    falls to where the line from the lightest P99 reaches the knee (about 336)."""
    phases = [(240.0, 0.45, 40), (240.0, 0.7, 60)]
    plain = run(PLAIN, phases)
    anchored = run(ANCHORED, phases)
    assert PLAIN.capacity(plain, target=PRIOR) == pytest.approx(PRIOR)
    want = bound(240.0, low=0.45, p99=0.7)
    assert want == pytest.approx(336.0, rel=0.01)
    assert ANCHORED.capacity(anchored, target=PRIOR) == pytest.approx(want, rel=0.02)


@pytest.mark.parametrize(
    "phases",
    [
        pytest.param([(240.0, 0.7, 60)], id="no-lighter-p99-seen-no-slope"),
        pytest.param([(240.0, 0.3, 30), (240.0, 0.5, 30)], id="under-the-served-rule"),
    ],
)
def test_no_bound_without_a_lighter_p99_or_below_the_served_rule(
    phases: list[tuple[float, float, int]],
) -> None:
    assert ANCHORED.capacity(run(ANCHORED, phases), target=PRIOR) == pytest.approx(PRIOR)


def test_the_bound_errs_towards_the_capacity_when_the_lightest_p99_is_above_zero_load() -> None:
    """The lightest P99 seen is at least the P99 at zero load; a larger intercept puts the
    knee further out, so the bound from the seen value is never below the one the true
    zero-load P99 would give."""
    true_zero_load, seen = 0.16, 0.45
    assert bound(240.0, low=seen, p99=0.7) > bound(240.0, low=true_zero_load, p99=0.7)


def test_the_lightest_p99_survives_the_status_round_trip_and_old_statuses_load() -> None:
    s = run(ANCHORED, [(240.0, 0.45, 40)])
    assert s.low == pytest.approx(0.45 * SLO)
    data = ANCHORED.to_dict(s)
    assert ANCHORED.from_dict(data, target=PRIOR).low == s.low
    del data["l"]
    assert ANCHORED.from_dict(data, target=PRIOR).low is None
    assert "l" not in PLAIN.to_dict(run(PLAIN, [(240.0, 0.45, 40)]))
    with pytest.raises(ValueError, match="lightest P99"):
        ANCHORED.from_dict({**ANCHORED.to_dict(s), "l": "fast"}, target=PRIOR)


def test_the_defaults_continue_the_line_to_the_slo_not_the_knee() -> None:
    """The frozen defaults (docs/policy.md, "Ninth split"): the bound reaches the SLO
    itself, looser than at the knee (at the knee it cost servegen-m-large-d10 1.38 ->
    1.51x, where a heavier request mix, not the load, raised the P99)."""
    assert state.CAPACITY.anchored == 1.0
    defaults = replace(state.CAPACITY, calm_step=None)
    s = run(defaults, [(240.0, 0.45, 40), (240.0, 0.7, 60)])
    want = bound(240.0, low=0.45, p99=0.7, knee=1.0)
    assert want > bound(240.0, low=0.45, p99=0.7)
    assert defaults.capacity(s, target=PRIOR) == pytest.approx(want, rel=0.02)
