"""The quantile floor under the measured forecast error (PolicyConfig.forecast_error_quantile)."""

from __future__ import annotations

import math

import pytest

from modelscale.autoscaling.adapt import ErrorState, ForecastError

ERRORS = ForecastError()


def _scored(errors: list[float], *, quantile: float) -> ErrorState:
    """Feed forecasts of 100 tok/s whose actual demand comes out exp(error) x that."""
    state = ErrorState()
    for i, x in enumerate(errors):
        # The forecast made at i x 15 s is due at (i + 1) x 15 s: scored on the next call.
        state = ERRORS.update(
            state,
            t=15.0 * i,
            actual=100.0 * math.exp(x),
            forecast=100.0,
            horizon=15.0,
            quantile=quantile,
        )
    return state


def _steps() -> list[float]:
    # Rare steps: one forecast in eight misses by +50 %, the rest are right.
    return [math.log(1.5) if i % 8 == 0 else 0.0 for i in range(1, 800)]


def test_the_quantile_covers_rare_steps_that_mean_plus_deviation_does_not() -> None:
    without = ERRORS.factor(_scored(_steps(), quantile=0.0))
    with_q = ERRORS.factor(_scored(_steps(), quantile=0.95))
    assert without is not None and with_q is not None
    assert without < 1.3  # mean + one upside deviation: well short of the +50 % steps
    assert with_q == pytest.approx(1.5, rel=0.05)  # the 95th percentile is the step


def test_off_by_default_tracks_nothing_and_keeps_the_old_factor() -> None:
    state = _scored(_steps(), quantile=0.0)
    assert state.q == 0.0
    assert "q" not in ERRORS.to_dict(state)
    f = math.exp(state.mean + ERRORS.z * math.sqrt(state.up))
    assert ERRORS.factor(state) == pytest.approx(min(max(f, 1.0), ERRORS.max_factor))


def test_the_quantile_survives_the_status_round_trip() -> None:
    state = _scored(_steps(), quantile=0.95)
    assert state.q > 0.0
    assert ERRORS.from_dict(ERRORS.to_dict(state)) == state


@pytest.mark.parametrize("bad", [-0.1, 1.0, 1.5])
def test_a_quantile_outside_zero_to_one_says_what_to_give(bad: float) -> None:
    with pytest.raises(ValueError, match=r"forecast_error_quantile .*\[0, 1\)"):
        ERRORS.update(ErrorState(), t=0.0, actual=1.0, forecast=1.0, horizon=15.0, quantile=bad)


def test_more_deviations_give_a_wider_margin_and_none_is_the_models_own() -> None:
    """PolicyConfig.forecast_error_z: the margin grows with the deviations covered."""
    state = _scored(_steps(), quantile=0.0)
    narrow, own, wide = (ERRORS.factor(state, z=z) for z in (0.0, None, 2.0))
    assert narrow is not None and own is not None and wide is not None
    assert narrow < own < wide
    assert own == ERRORS.factor(state, z=ERRORS.z)


@pytest.mark.parametrize("bad", [-0.5, math.nan])
def test_a_negative_z_says_what_to_give(bad: float) -> None:
    with pytest.raises(ValueError, match=r"forecast_error_z .*>= 0"):
        ERRORS.factor(_scored(_steps(), quantile=0.0), z=bad)


def _with_peak(errors: list[float], *, half_life: float, every: float = 15.0) -> ErrorState:
    state = ErrorState()
    for i, x in enumerate(errors):
        state = ERRORS.update(
            state,
            t=every * i,
            actual=100.0 * math.exp(x),
            forecast=100.0,
            horizon=every,
            peak_half_life=half_life,
        )
    return state


def test_the_peak_covers_the_largest_step_seen_then_halves_every_half_life() -> None:
    """PolicyConfig.forecast_error_peak_half_life: one +80 % step among right forecasts."""
    errors = [0.0] * 20 + [math.log(1.8)] + [0.0] * 40  # the step is scored at t = 315 s
    state = _with_peak(errors[:22], half_life=600.0)  # one sample after the step
    factor = ERRORS.factor(state)
    assert factor is not None and 1.75 < factor <= 1.8  # the score's small offset, one decay
    later = _with_peak(errors, half_life=600.0)  # 40 samples (600 s) after the step
    assert later.peak == pytest.approx(math.log(1.8) / 2.0, rel=0.05)
    assert ERRORS.factor(later) == pytest.approx(math.sqrt(1.8), rel=0.05)
    off = _with_peak(errors, half_life=0.0)
    assert off.peak == 0.0 and "k" not in ERRORS.to_dict(off)
    assert ERRORS.factor(off) < 1.2  # mean + one deviation: the step is mostly forgotten


def test_the_peak_survives_the_status_round_trip_and_refuses_a_negative_half_life() -> None:
    state = _with_peak([0.0] * 10 + [0.5] + [0.0] * 5, half_life=600.0)
    assert state.peak > 0.0 and state.peak_t is not None
    assert ERRORS.from_dict(ERRORS.to_dict(state)) == state
    with pytest.raises(ValueError, match=r"forecast_error_peak_half_life .*>= 0"):
        ERRORS.update(
            ErrorState(), t=0.0, actual=1.0, forecast=1.0, horizon=1.0, peak_half_life=-1.0
        )
