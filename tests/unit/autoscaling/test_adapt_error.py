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


def _step_run() -> list[float]:
    """Calm forecasts, then the 9 made in the horizon before a step no history foretold
    (each under by x2.3, as on servegen-m-large-d9-morning), then calm again."""
    return [0.0] * 40 + [math.log(2.3)] * 9 + [0.0] * 4


def test_a_bias_clip_keeps_one_step_from_lifting_the_forecasts_bias() -> None:
    """ForecastError.bias_clip (the thirty-ninth round's field, off by default): the
    mean learns each error clipped, the upside deviation still reads all of it."""
    clipped = ForecastError(bias_clip=0.1)
    whole, cut = ErrorState(), ErrorState()
    for i, x in enumerate(_step_run()):
        kw = {"t": 15.0 * i, "actual": 100.0 * math.exp(x), "forecast": 100.0, "horizon": 15.0}
        whole, cut = ERRORS.update(whole, **kw), clipped.update(cut, **kw)
    assert cut.mean < whole.mean
    assert cut.up > 0.0
    f_whole, f_cut = ERRORS.factor(whole, z=0.25), clipped.factor(cut, z=0.25)
    assert f_whole is not None and f_cut is not None
    assert 1.0 < f_cut < f_whole


def test_without_a_bias_clip_the_error_is_learned_as_before() -> None:
    state = _scored(_steps())
    assert ForecastError(bias_clip=None).update(
        state, t=1e6, actual=100.0, forecast=100.0, horizon=15.0
    ) == ERRORS.update(state, t=1e6, actual=100.0, forecast=100.0, horizon=15.0)


@pytest.mark.parametrize("bad", [0.0, -0.1, 2.5, math.nan])
def test_a_bias_clip_out_of_range_says_what_to_give(bad: float) -> None:
    with pytest.raises(ValueError, match=r"bias_clip .*0 < x <= 2"):
        ForecastError(bias_clip=bad)
