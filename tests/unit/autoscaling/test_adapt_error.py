"""The measured forecast error (adapt.ForecastError): the margin over the forecast mean."""

from __future__ import annotations

import math

import pytest

from modelscale.autoscaling.adapt import ErrorState, ForecastError

ERRORS = ForecastError()
# The whole error, as before the fortieth round froze the bias clip.
WHOLE = ForecastError(bias_clip=None, bias_repeat_s=None)


def _scored(errors: list[float], model: ForecastError = ERRORS) -> ErrorState:
    """Feed forecasts of 100 tok/s whose actual demand comes out exp(error) x that."""
    state = ErrorState()
    for i, x in enumerate(errors):
        # The forecast made at i x 15 s is due at (i + 1) x 15 s: scored on the next call.
        state = model.update(
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
    """ForecastError.bias_clip (the thirty-ninth round's field, 0.2 since the fortieth):
    the mean learns each error clipped, the upside deviation still reads all of it."""
    clipped = ERRORS
    whole, cut = ErrorState(), ErrorState()
    for i, x in enumerate(_step_run()):
        kw = {"t": 15.0 * i, "actual": 100.0 * math.exp(x), "forecast": 100.0, "horizon": 15.0}
        whole, cut = WHOLE.update(whole, **kw), clipped.update(cut, **kw)
    assert cut.mean < whole.mean
    assert cut.up > 0.0
    f_whole, f_cut = WHOLE.factor(whole, z=0.25), clipped.factor(cut, z=0.25)
    assert f_whole is not None and f_cut is not None
    assert 1.0 < f_cut < f_whole


def test_without_a_bias_clip_the_whole_error_is_learned() -> None:
    """The first scored error is the whole mean (weight 1): about log(1.5) without the clip,
    the clip's 0.2 with it."""
    assert _scored([0.0, math.log(1.5)], WHOLE).mean == pytest.approx(math.log(1.5), abs=0.01)
    assert _scored([0.0, math.log(1.5)]).mean == pytest.approx(0.2)


@pytest.mark.parametrize("bad", [0.0, -0.1, 2.5, math.nan])
def test_a_bias_clip_out_of_range_says_what_to_give(bad: float) -> None:
    with pytest.raises(ValueError, match=r"bias_clip .*0 < x <= 2"):
        ForecastError(bias_clip=bad)


def _run(model: ForecastError, errors: list[float]) -> list[ErrorState]:
    """Each state after scoring `errors` one per 15 s pass (forecasts of 100 tok/s)."""
    state, out = ErrorState(), []
    for i, x in enumerate(errors):
        state = model.update(
            state, t=15.0 * i, actual=100.0 * math.exp(x), forecast=100.0, horizon=15.0
        )
        out.append(state)
    return out


def _bursts(every: int, count: int) -> list[float]:
    """Calm, then `count` bursts of 4 forecasts under by x2, one each `every` passes."""
    calm = [0.0] * 40
    for _ in range(count):
        calm += [math.log(2.0)] * 4 + [0.0] * (every - 4)
    return calm


def test_a_repeat_window_learns_a_bursting_loads_errors_whole() -> None:
    """ForecastError.bias_repeat_s (the fortieth round's field, off by default): the
    first burst is clipped as one step is; a burst again within the window is a bias the
    forecast has, learned whole, so the margin widens before the next one."""
    clip = ForecastError(bias_clip=0.1, bias_repeat_s=None)
    repeat = ForecastError(bias_clip=0.1, bias_repeat_s=600.0)
    errors = _bursts(every=16, count=3)  # a burst each 4 minutes
    cut, kept, whole = _run(clip, errors), _run(repeat, errors), _run(WHOLE, errors)
    first_over = 40 + 4  # the first burst is scored, the second not yet
    assert kept[first_over] == cut[first_over]._replace(
        last_big=kept[first_over].last_big, whole=False
    )
    assert cut[-1].mean < kept[-1].mean <= whole[-1].mean + 1e-9
    f_cut, f_kept = clip.factor(cut[-1], z=0.25), repeat.factor(kept[-1], z=0.25)
    assert f_cut is not None and f_kept is not None and f_kept > f_cut


def test_a_repeat_window_still_clips_one_step_and_bursts_far_apart() -> None:
    clip = ForecastError(bias_clip=0.1, bias_repeat_s=None)
    repeat = ForecastError(bias_clip=0.1, bias_repeat_s=300.0)
    for errors in (_step_run(), _bursts(every=40, count=3)):  # one step; bursts 10 min apart
        assert [s.mean for s in _run(repeat, errors)] == [s.mean for s in _run(clip, errors)]


def test_the_repeat_state_survives_the_status_round_trip() -> None:
    model = ForecastError(bias_clip=0.1, bias_repeat_s=600.0)
    state = _run(model, _bursts(every=16, count=2))[-1]
    assert state.last_big is not None and state.whole
    assert model.from_dict(model.to_dict(state)) == state
    assert "b" not in WHOLE.to_dict(_scored(_steps(), WHOLE))  # unchanged status without it
    assert ForecastError(bias_clip=0.2, bias_repeat_s=600.0) == ERRORS  # the defaults


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"bias_clip": None}, r"bias_repeat_s 600.0 needs a bias_clip: give both"),
        ({"bias_clip": 0.1, "bias_repeat_s": 30.0}, r"bias_repeat_s 30.0: .*60 < s <= 3600"),
        ({"bias_clip": 0.1, "bias_repeat_s": math.nan}, r"bias_repeat_s nan: .*60 < s"),
        ({"bias_clip": 0.1, "bias_repeat_s": 7200.0}, r"<= 3600"),
    ],
)
def test_a_bad_repeat_window_says_what_to_give(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ForecastError(**kwargs)  # type: ignore[arg-type]
