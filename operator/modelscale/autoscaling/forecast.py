"""Token-rate forecasters with prediction intervals, updated online: the seasonal one and
the registry. The interface every forecaster shares (so the recommender, the tests and
`bench/forecast_mape.py` can swap them), `Naive` and `Holt` are in holt.py and
re-exported here.

- `Seasonal`: multiplicative time-of-day profile (`bins` bins over a day, each an EWMA of
  the rate seen in that bin) times a damped Holt on the deseasonalised rate. It behaves
  exactly like `Holt` until one full day has been seen and every bin has data.

Hand-written rather than statsmodels: updates must be incremental (one sample per call,
microseconds, state in a few hundred bytes of status) and robust to bursts; statsmodels'
ExponentialSmoothing refits on the whole history every time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Literal

# The shared interface and the non-seasonal forecasters live in holt.py (issue 9: module
# size); they are re-exported here so `forecast.X` stays the one place callers look.
from modelscale.autoscaling.holt import (
    NUMBER_TYPES,
    STEP_SECONDS,
    Forecast,
    Forecaster,
    Holt,
    HoltState,
    Naive,
    NaiveState,
    round6,
)

__all__ = [
    "DAY_SECONDS",
    "FORECASTERS",
    "STEP_SECONDS",
    "Forecast",
    "Forecaster",
    "Holt",
    "HoltState",
    "Naive",
    "NaiveState",
    "Seasonal",
    "SeasonalState",
    "SeasonalityMode",
]

DAY_SECONDS = 86400.0

# ------------------------------------------------------------------------- seasonal


SeasonalityMode = Literal["Auto", "Daily", "None"]


@dataclass(frozen=True, slots=True)
class SeasonalState:
    # Holt on the deseasonalised rate (rate / profile), and on the rate itself (the
    # non-seasonal alternative).
    holt: HoltState = field(default_factory=HoltState)
    raw: HoltState = field(default_factory=HoltState)
    first_t: float | None = None
    values: tuple[float | None, ...] = ()  # EWMA of the rate per time-of-day bin
    active: bool = False  # the profile has been learned (a day seen, every bin filled)
    total: float = 0.0  # sum of `values`, kept so the profile costs O(1) per call
    # One pending check: (target time, seasonal forecast, plain forecast, forecast used)
    # made `check_horizon` earlier; when it is due the errors below update.
    check: tuple[float, float, float, float] | None = None
    err_seasonal: float = 0.0  # EWMA of relative error at check_horizon
    err_plain: float = 0.0
    # EWMA of 2 x (relative under-forecast at check_horizon)^2: calibrates the upper
    # bound where one-step errors understate multi-step ones (smooth but wandering load).
    up_var: float = 0.0


@dataclass(frozen=True, slots=True)
class Seasonal:
    """Daily profile x damped Holt. `gamma` is the weight a new day's data gets in a bin.

    The profile is multiplicative (a bin's value over the mean of all bins, floored at
    `min_factor`): LLM traffic scales with the number of users awake, not by an offset.

    `mode`: "Daily" uses the profile as soon as it is learned; "None" never (plain Holt);
    "Auto" keeps scoring both forecasts `check_horizon` ahead against what happened and
    uses the profile only while it has been the more accurate one. Traffic whose days do
    not repeat (ServeGen m-large: a few large clients) falls back to Holt by itself."""

    holt: Holt = field(default_factory=Holt)
    # 30-minute bins: finer bins learned noise on the ServeGen traces (MAPE rose at 10 m).
    bins: int = 48
    gamma: float = 0.3
    min_factor: float = 0.05
    mode: SeasonalityMode = "Auto"
    check_horizon: float = 600.0
    err_alpha: float = 0.1
    name: str = "seasonal"

    def initial(self) -> SeasonalState:
        return SeasonalState(values=(None,) * self.bins)

    def _width(self) -> float:
        return DAY_SECONDS / self.bins

    def factor(self, state: SeasonalState, *, t: float) -> float:
        """Profile at time t, linearly interpolated between bin centres."""
        if not state.active:
            return 1.0
        values = state.values
        mean = state.total / self.bins
        if mean <= 0.0:
            return 1.0
        pos = (t % DAY_SECONDS) / self._width() - 0.5
        i0 = math.floor(pos)
        frac = pos - i0
        v0 = values[i0 % self.bins] or 0.0
        v1 = values[(i0 + 1) % self.bins] or 0.0
        return max((v0 * (1.0 - frac) + v1 * frac) / mean, self.min_factor)

    def uses_profile(self, state: SeasonalState) -> bool:
        if not state.active or self.mode == "None":
            return False
        return self.mode == "Daily" or state.err_seasonal < state.err_plain

    def update(self, state: SeasonalState, *, t: float, value: float) -> SeasonalState:
        if len(state.values) != self.bins:
            state = replace(state, values=(None,) * self.bins)
        if state.holt.t is not None and t <= state.holt.t:
            return state
        first_t = t if state.first_t is None else state.first_t
        dt = 0.0 if state.holt.t is None else t - state.holt.t
        f = self.factor(state, t=t)
        holt, clipped_z = self.holt.update_clipped(state.holt, t=t, value=value / f)
        raw = self.holt.update(state.raw, t=t, value=value)
        clipped = clipped_z * f
        b = int((t % DAY_SECONDS) // self._width()) % self.bins
        values = list(state.values)
        old = values[b]
        total = state.total
        if old is None:
            new_v = round6(clipped)
        else:
            # A day's worth of samples in a bin adds up to weight gamma; the first day's
            # samples average equally (weight floor dt/elapsed) so its first sample does
            # not stand for the whole bin.
            frac = min(dt / self._width(), 1.0)
            w = 1.0 - (1.0 - self.gamma) ** frac
            if t - first_t < DAY_SECONDS:
                into_bin = (t % self._width()) / self._width()
                w = max(w, min(frac / max(into_bin, frac), 1.0))
            new_v = round6(old + w * (clipped - old))
        values[b] = new_v
        total += new_v - (old or 0.0)
        active = state.active
        if not active and t - first_t >= DAY_SECONDS and all(v is not None for v in values):
            active = True
            new = replace(state, values=tuple(values), active=True, total=total)
            g = self.factor(new, t=t)
            holt = replace(holt, level=holt.level / g, trend=holt.trend / g, var=holt.var / g / g)
        new = SeasonalState(
            holt=holt,
            raw=raw,
            first_t=first_t,
            values=tuple(values),
            active=active,
            total=total,
            check=state.check,
            err_seasonal=state.err_seasonal,
            err_plain=state.err_plain,
            up_var=state.up_var,
        )
        return self._score(new, t=t, value=value)

    def _score(self, state: SeasonalState, *, t: float, value: float) -> SeasonalState:
        """Settle a due check against `value`, or start the next one."""
        if state.check is not None:
            due, by_profile, plain, used = state.check
            if t < due:
                return state
            scale = max(abs(value), abs(by_profile), abs(plain), 1e-9)
            a = self.err_alpha
            # Relative to the larger of the two, so in [0, 1]: a forecast near zero
            # (a new ModelDeployment) must not blow the bound up.
            under = max(value - used, 0.0) / max(abs(used), abs(value), 1e-9)
            return replace(
                state,
                check=None,
                err_seasonal=state.err_seasonal
                + a * (abs(by_profile - value) / scale - state.err_seasonal),
                err_plain=state.err_plain + a * (abs(plain - value) / scale - state.err_plain),
                up_var=state.up_var + a * (2.0 * under * under - state.up_var),
            )
        h = self.check_horizon
        by_profile = self._with_profile(state, t=t, horizon=h).mean
        plain = self.holt.forecast(state.raw, t=t, horizon=h).mean
        used = by_profile if self.uses_profile(state) else plain
        return replace(state, check=(t + h, round6(by_profile), round6(plain), round6(used)))

    def _with_profile(self, state: SeasonalState, *, t: float, horizon: float) -> Forecast:
        fc = self.holt.forecast(state.holt, t=t, horizon=horizon)
        f = self.factor(state, t=t + horizon)
        return Forecast(mean=fc.mean * f, upper=fc.upper * f)

    def forecast(self, state: SeasonalState, *, t: float, horizon: float) -> Forecast:
        if self.uses_profile(state):
            fc = self._with_profile(state, t=t, horizon=horizon)
        else:
            fc = self.holt.forecast(state.raw, t=t, horizon=horizon)
        if state.up_var <= 0.0:
            return fc
        # Widen the bound to the under-forecasts actually seen `check_horizon` ahead,
        # scaled linearly to other horizons (a missed trend grows linearly; a square-root
        # scaling covered 99 % instead of the nominal 95 % at 2 minutes on ServeGen).
        ahead = max(t + horizon - (state.raw.t or t), 0.0)
        rel = math.sqrt(state.up_var) * ahead / self.check_horizon
        return Forecast(mean=fc.mean, upper=max(fc.upper, fc.mean * (1.0 + self.holt.z * rel)))

    def to_dict(self, state: SeasonalState) -> dict[str, Any]:
        return {
            "h": self.holt.to_dict(state.holt),
            "r": self.holt.to_dict(state.raw),
            "t0": state.first_t,
            # Bins are rounded when written (update), so this is a plain copy.
            "p": list(state.values),
            "on": state.active,
            "tot": state.total,
            "ck": None if state.check is None else list(state.check),
            "es": round6(state.err_seasonal),
            "ep": round6(state.err_plain),
            "uv": round6(state.up_var),
        }

    def from_dict(self, data: dict[str, Any]) -> SeasonalState:
        holt = self.holt.from_dict(data.get("h") or {})
        raw = self.holt.from_dict(data.get("r") or {})
        values = data.get("p") or []
        if len(values) != self.bins:  # bin count changed: relearn the profile
            return replace(self.initial(), holt=raw, raw=raw)
        t0 = data.get("t0")
        # No per-bin float() here: this runs on every recommendation and JSON numbers
        # (int or float) work alike in the arithmetic; `tot` is kept for the same reason.
        parsed: tuple[float | None, ...] = tuple(values)
        if not NUMBER_TYPES.issuperset(map(type, parsed)):  # C-speed check: runs every call
            raise ValueError("seasonal profile holds a non-number")
        total = data.get("tot")
        check = data.get("ck")
        return SeasonalState(
            holt=holt,
            raw=raw,
            first_t=None if t0 is None else float(t0),
            values=parsed,
            active=bool(data.get("on", False)),
            total=float(total) if total is not None else sum(v for v in parsed if v is not None),
            check=None if not check or len(check) != 4 else tuple(float(c) for c in check),  # type: ignore[arg-type]
            err_seasonal=float(data.get("es", 0.0)),
            err_plain=float(data.get("ep", 0.0)),
            up_var=float(data.get("uv", 0.0)),
        )


FORECASTERS: dict[str, Forecaster[Any]] = {
    "naive": Naive(),
    "holt": Holt(),
    "daily": Seasonal(mode="Daily", name="daily"),  # the profile always, once learned
    "seasonal": Seasonal(),  # Auto: the profile while it predicts better
}
