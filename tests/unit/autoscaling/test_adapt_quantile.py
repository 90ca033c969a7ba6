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
