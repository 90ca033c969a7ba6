"""The measured forecast error (adapt.ForecastError): the margin over the forecast mean."""

from __future__ import annotations

import math

import pytest

from modelscale.autoscaling.adapt import ErrorState, ForecastError

ERRORS = ForecastError()


def _scored(errors: list[float]) -> ErrorState:
    """Feed forecasts of 100 tok/s whose actual demand comes out exp(error) x that."""
    state = ErrorState()
    for i, x in enumerate(errors):
        # The forecast made at i x 15 s is due at (i + 1) x 15 s: scored on the next call.
        state = ERRORS.update(
            state, t=15.0 * i, actual=100.0 * math.exp(x), forecast=100.0, horizon=15.0
        )
    return state


def _steps() -> list[float]:
    # Rare steps: one forecast in eight misses by +50 %, the rest are right.
    return [math.log(1.5) if i % 8 == 0 else 0.0 for i in range(1, 800)]


def test_the_factor_is_the_mean_plus_upside_deviations_of_the_log_error() -> None:
    state = _scored(_steps())
    f = math.exp(state.mean + ERRORS.z * math.sqrt(state.up))
    assert ERRORS.factor(state) == pytest.approx(min(max(f, 1.0), ERRORS.max_factor))
    assert 1.0 < f < 1.3  # mean + one upside deviation: well short of the +50 % steps


def test_the_error_survives_the_status_round_trip_and_ignores_removed_keys() -> None:
    """A status written while the quantile and peak floors existed (removed with the
    other measured-and-not-chosen knobs; docs/policy.md) may hold "q" and "k"."""
    state = _scored(_steps())
    data = ERRORS.to_dict(state)
    assert ERRORS.from_dict(data) == state
    assert ERRORS.from_dict({**data, "q": 0.4, "k": [0.5, 300.0]}) == state


def test_more_deviations_give_a_wider_margin_and_none_is_the_models_own() -> None:
    """PolicyConfig.forecast_error_z: the margin grows with the deviations covered."""
    state = _scored(_steps())
    narrow, own, wide = (ERRORS.factor(state, z=z) for z in (0.0, None, 2.0))
    assert narrow is not None and own is not None and wide is not None
    assert narrow < own < wide
    assert own == ERRORS.factor(state, z=ERRORS.z)


@pytest.mark.parametrize("bad", [-0.5, math.nan])
def test_a_negative_z_says_what_to_give(bad: float) -> None:
    with pytest.raises(ValueError, match=r"forecast_error_z .*>= 0"):
        ERRORS.factor(_scored(_steps()), z=bad)
