"""The present-knowing reference: knows each minute's need once the minute begins, never
the future; the margin search finds the cheapest replay that meets the target."""

from __future__ import annotations

import numpy as np
import pytest
from sim_trace import make_trace
from test_sim_oracle_cli import ramp

from modelscale.simulate import bound, figures, present, suite
from modelscale.simulate.replica import ReplicaParams, Slo, sustainable_request_rate

MINUTES = np.array([0.0, 60.0, 120.0, 180.0, 240.0])


@pytest.mark.parametrize(
    ("need", "margin", "hold_s", "now", "expected"),
    [
        pytest.param([2, 5, 3], 0.0, 0.0, 59.0, 2, id="knows-nothing-after-now"),
        pytest.param([2, 5, 3], 0.0, 0.0, 60.0, 5, id="a-need-known-from-its-time"),
        pytest.param([2, 5, 3], 0.0, 140.0, 130.0, 5, id="kept-through-a-dip-within-hold"),
        # The 5 was in force until 120 s: at 250 s unneeded for 130 s, at 270 s for 150 s.
        pytest.param([2, 5, 3, 3, 3], 0.0, 140.0, 250.0, 5, id="held-one-horizon-after-it"),
        pytest.param([2, 5, 3, 3, 3], 0.0, 140.0, 270.0, 3, id="released-after-the-hold"),
        pytest.param([4], 0.25, 0.0, 10.0, 5, id="margin-exact-no-rounding-up"),
        pytest.param([4], 0.3, 0.0, 10.0, 6, id="margin-rounds-up"),
        pytest.param([1.2, 2.5], 0.0, 0.0, 60.0, 3, id="fractional-need-rounds-up"),
        pytest.param([0.0], 0.0, 0.0, 30.0, 1, id="never-below-one"),
        pytest.param([2, 3], 0.0, 0.0, 900.0, 3, id="the-last-need-stays-in-force"),
    ],
)
def test_asks_for_the_present_need_times_the_margin(
    need: list[float], margin: float, hold_s: float, now: float, expected: int
) -> None:
    ref = present.PresentOracle(
        times=MINUTES[: len(need)], need=np.array(need, dtype=float), margin=margin, hold_s=hold_s
    )
    assert ref.replicas_at(now) == expected


ONE = {"times": np.array([0.0]), "need": np.array([1.0])}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({**ONE, "margin": -0.1, "hold_s": 0.0}, "margin", id="negative-margin"),
        pytest.param({**ONE, "margin": 0.0, "hold_s": -1.0}, "hold_s", id="negative-hold"),
        pytest.param(
            {"times": np.zeros(0), "need": np.zeros(0), "margin": 0.0, "hold_s": 0.0},
            "non-empty",
            id="empty",
        ),
        pytest.param(
            {"times": np.zeros(2), "need": np.zeros(1), "margin": 0.0, "hold_s": 0.0},
            "same length",
            id="lengths-differ",
        ),
    ],
)
def test_refuses_nonsense(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        present.PresentOracle(**kwargs)  # type: ignore[arg-type]


def test_trailing_fluid_load_reads_only_requests_that_have_arrived() -> None:
    """Ten requests in the first minute, none after: at 60 s the need is theirs, at 30 s
    half of them over half the window (the same rate), at 150 s nothing is left in the
    window; a request arriving at 61 s is not seen at 60 s."""
    tr = make_trace("t", np.r_[np.linspace(1, 59, 10), 61.0], inp=200, out=50, duration_s=300)
    params, slo = ReplicaParams(), Slo()
    per = sustainable_request_rate(
        params, mean_input=200, mean_output=50, slo=slo, max_prefill_share=0.9
    )
    load = bound.trailing_fluid_load(
        tr, params=params, slo=slo, times=np.array([30.0, 60.0, 150.0])
    )
    assert load[0] == pytest.approx(5 / 30 / per)
    assert load[1] == pytest.approx(10 / 60 / per)
    assert load[2] == 0.0


def fake_replay(threshold: float, runs: list[float]) -> object:
    """Meets the target from `threshold` on; cost grows with the margin."""

    def replay(margin: float) -> present.Point:
        runs.append(margin)
        meets = margin >= threshold
        return present.Point(margin, 1.0 if meets else 0.9, 100 + margin, meets)

    return replay


@pytest.mark.parametrize(
    ("threshold", "expected"),
    [
        pytest.param(0.0, 0.0, id="no-margin-needed-one-replay"),
        pytest.param(0.4, 0.40625, id="bisected-to-the-step"),
        pytest.param(1.99, 2.0, id="just-under-the-top"),
    ],
)
def test_margin_search_finds_the_cheapest_point_that_meets(
    threshold: float, expected: float
) -> None:
    runs: list[float] = []
    search = present.cheapest_margin(fake_replay(threshold, runs))  # type: ignore[arg-type]
    assert search.best is not None
    assert search.best.margin == pytest.approx(expected)
    assert search.best.margin - threshold <= present.MARGIN_STEP
    assert len(search.points) == len(runs) <= 9


def test_margin_search_says_none_when_even_the_top_misses() -> None:
    runs: list[float] = []
    search = present.cheapest_margin(fake_replay(5.0, runs))  # type: ignore[arg-type]
    assert search.best is None
    assert runs == [0.0, present.MAX_MARGIN]


def test_reference_on_a_ramp_needs_a_margin_for_the_step() -> None:
    """On a 3x step the present-knowing reference's replicas come a start-up after the
    need: without a margin it misses the step, and the search finds the margin that
    meets the target, the cheapest of the replays that did."""
    setup = suite.prepare(ramp(), params=ReplicaParams(), slo=Slo(), dt=0.5)
    search = suite.present_reference(setup)
    assert search.points[0].margin == 0.0
    assert not search.points[0].meets
    assert search.best is not None
    assert search.best.margin > 0
    assert search.best.attainment >= figures.TARGET_WINDOWS
    met = [p.replica_seconds for p in search.points if p.meets]
    assert search.best.replica_seconds == min(met)
