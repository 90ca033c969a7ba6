"""Token-rate forecasters with prediction intervals, updated online.

Every forecaster has the same interface so the recommender, the tests and
`bench/forecast_mape.py` can swap them:

    state = f.initial()
    state = f.update(state, t=..., value=...)       # one sample, time in Unix seconds
    fc = f.forecast(state, t=now, horizon=120.0)     # Forecast(mean, upper) at now + horizon
    f.to_dict(state) / f.from_dict(data)            # JSON-safe, compact (kept in status)

- `Naive`: the last value (baseline for MAPE).
- `Holt`: damped Holt (level + trend, damping phi) that accepts irregular sampling; the
  upper bound comes from a running one-step error variance, propagated to h steps with
  the closed-form variance of ETS(A,Ad,N). Residuals are winsorised at `clip` standard
  errors, so one minute-scale burst moves the level by at most alpha * clip * sigma.
- `Seasonal`: multiplicative time-of-day profile (`bins` bins over a day, each an EWMA of
  the rate seen in that bin) times a damped Holt on the deseasonalised rate. It behaves
  exactly like `Holt` until one full day has been seen and every bin has data.

Hand-written rather than statsmodels: updates must be incremental (one sample per call,
microseconds, state in a few hundred bytes of status) and robust to bursts; statsmodels'
ExponentialSmoothing refits on the whole history every time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Generic, Literal, Protocol, TypeVar

# Smoothing constants are per reference step; irregular gaps are converted to steps.
STEP_SECONDS = 15.0
DAY_SECONDS = 86400.0

S = TypeVar("S")
_NUMBERS = frozenset((int, float, type(None)))


@dataclass(frozen=True, slots=True)
class Forecast:
    mean: float
    upper: float


class Forecaster(Protocol, Generic[S]):
    @property
    def name(self) -> str: ...

    def initial(self) -> S: ...

    def update(self, state: S, *, t: float, value: float) -> S: ...

    def forecast(self, state: S, *, t: float, horizon: float) -> Forecast: ...

    def to_dict(self, state: S) -> dict[str, Any]: ...

    def from_dict(self, data: dict[str, Any]) -> S: ...


def _r(x: float) -> float:
    """Round for status: 6 significant digits keeps the JSON short."""
    return float(f"{x:.6g}")


# ---------------------------------------------------------------------------- naive


@dataclass(frozen=True, slots=True)
class NaiveState:
    t: float | None = None
    value: float = 0.0


class Naive:
    name = "naive"

    def initial(self) -> NaiveState:
        return NaiveState()

    def update(self, state: NaiveState, *, t: float, value: float) -> NaiveState:
        return NaiveState(t=t, value=value)

    def forecast(self, state: NaiveState, *, t: float, horizon: float) -> Forecast:
        return Forecast(mean=state.value, upper=state.value)

    def to_dict(self, state: NaiveState) -> dict[str, Any]:
        return {"t": state.t, "v": _r(state.value)}

    def from_dict(self, data: dict[str, Any]) -> NaiveState:
        t = data.get("t")
        return NaiveState(t=None if t is None else float(t), value=float(data.get("v", 0.0)))


# ----------------------------------------------------------------------------- holt


@dataclass(frozen=True, slots=True)
class HoltState:
    t: float | None = None
    level: float = 0.0
    trend: float = 0.0  # per STEP_SECONDS
    var: float = 0.0  # one-step error variance (from under-forecasts, see update)
    n: int = 0
    es: float = 0.0  # EWMA of the (winsorised) one-step error
    ea: float = 0.0  # EWMA of its absolute value; |es| / ea is the tracking signal


@dataclass(frozen=True, slots=True)
class Holt:
    """Damped Holt; `alpha`, `beta` (share of alpha going to the trend) and `phi` are per
    15 s step. `z` sets the upper bound (1.645: one-sided 95 %).

    Adaptive (Trigg & Leach's tracking signal): while one-step errors keep the same sign
    (a real ramp), alpha rises towards `alpha_max` and damping relaxes towards `phi_max`;
    on noise and bursts (errors of both signs) it stays at the calm `alpha`/`phi`. A fixed
    setting had to choose between lagging a ramp and extrapolating every burst."""

    # Tuned with bench/forecast_mape.py on the shared traces: a low alpha and strong
    # damping keep the minute-scale Azure bursts from being extrapolated as trends.
    alpha: float = 0.15
    beta: float = 0.03
    phi: float = 0.9
    alpha_max: float = 0.6
    phi_max: float = 0.99
    track_alpha: float = 0.15
    clip: float = 2.5
    z: float = 1.645
    var_alpha: float = 0.08
    warmup: int = 8
    # Robust-scale floor as a share of the level: on a perfectly steady series the error
    # variance is ~0 and would otherwise disable the burst clipping.
    min_rel_sigma: float = 0.05
    name: str = "holt"

    def initial(self) -> HoltState:
        return HoltState()

    def update(self, state: HoltState, *, t: float, value: float) -> HoltState:
        return self.update_clipped(state, t=t, value=value)[0]

    def update_clipped(
        self, state: HoltState, *, t: float, value: float
    ) -> tuple[HoltState, float]:
        """Update and also return the winsorised value used (for the seasonal bins)."""
        if state.t is None:
            return HoltState(t=t, level=value, trend=0.0, var=0.0, n=1), value
        dt = t - state.t
        if dt <= 0.0:  # duplicate or out-of-order sample: nothing new
            return state, value
        k = dt / STEP_SECONDS
        alpha, phi = self._gains(state)
        damp = self._damped_sum(k, phi)
        predicted = state.level + state.trend * damp
        err = value - predicted
        sigma = max(math.sqrt(state.var), self.min_rel_sigma * abs(state.level))
        if state.n >= self.warmup and sigma > 0.0:
            bound = self.clip * sigma
            err_c = min(max(err, -bound), bound)
            # The variance sees a little more of a burst than the level does, so the
            # interval widens on bursty traffic without one spike dominating it.
            bound_v = (self.clip + 1.0) * sigma
            err_v = min(max(err, -bound_v), bound_v)
        else:
            err_c = err_v = err
        a = 1.0 - (1.0 - alpha) ** k
        level = predicted + a * err_c
        # Overshoot (an error against the trend) also takes back a share `a` of the
        # trend: after a step, Holt's trend otherwise carries the level far past the new
        # rate (5000 -> 300 tok/s was forecast at 0 for five minutes).
        keep = 1.0 - a if err_c * state.trend < 0.0 else 1.0
        trend = state.trend * keep * phi**k + a * self.beta * err_c / max(k, 1.0)
        w = 1.0 - (1.0 - self.var_alpha) ** k if state.n > 1 else 1.0
        # Upside semi-variance (x2, so it equals the variance for symmetric noise): the
        # upper bound is the risk of more demand than forecast; a sudden drop must not
        # widen it (it would scale *up* when traffic falls).
        up = max(err_v, 0.0)
        var = (1.0 - w) * state.var + w * 2.0 * up * up / max(k, 1.0)
        wt = 1.0 - (1.0 - self.track_alpha) ** min(k, 4.0)
        es = state.es + wt * (err_c - state.es)
        ea = state.ea + wt * (abs(err_c) - state.ea)
        new = HoltState(t=t, level=level, trend=trend, var=var, n=state.n + 1, es=es, ea=ea)
        return new, predicted + err_c

    def _gains(self, state: HoltState) -> tuple[float, float]:
        """(alpha, phi) for the current tracking signal."""
        ts = abs(state.es) / state.ea if state.ea > 0.0 else 0.0
        ts *= ts  # only a clearly one-sided run of errors moves the gains much
        return (
            self.alpha + (self.alpha_max - self.alpha) * ts,
            self.phi + (self.phi_max - self.phi) * ts,
        )

    def forecast(self, state: HoltState, *, t: float, horizon: float) -> Forecast:
        if state.t is None:
            return Forecast(mean=0.0, upper=0.0)
        steps = max((t + horizon - state.t) / STEP_SECONDS, 0.0)
        _, phi = self._gains(state)
        mean = max(state.level + state.trend * self._damped_sum(steps, phi), 0.0)
        # The interval uses the calm alpha/phi: with the adaptive ones (a ramp) the ETS
        # multiplier made the bound ~50 % above the mean and, in the trace simulator,
        # cost 5-15 % more replica-seconds at the same SLO attainment. Systematic misses
        # are covered by the seasonal forecaster's 10-minute calibration instead.
        h_var = self._h_var(var=state.var, steps=steps, alpha=self.alpha, phi=self.phi)
        return Forecast(mean=mean, upper=mean + self.z * math.sqrt(h_var))

    @staticmethod
    def _damped_sum(k: float, phi: float) -> float:
        """phi + phi^2 + ... + phi^k, continued to fractional k."""
        if phi >= 1.0:
            return k
        return float(phi * (1.0 - phi**k) / (1.0 - phi))

    def _h_var(self, *, var: float, steps: float, alpha: float, phi: float) -> float:
        """Variance of the h-step error of ETS(A,Ad,N) (Hyndman et al., 2008, table 6.1):
        var * (1 + sum_{j=1}^{h-1} c_j^2) with c_j = alpha + alpha*beta*phi(1-phi^j)/(1-phi)."""
        m = max(steps - 1.0, 0.0)
        a = alpha
        if phi >= 1.0:
            phi = 0.999999
        g = a * self.beta * phi / (1.0 - phi)
        c = a + g
        total = (
            m * c * c
            - 2.0 * c * g * phi * (1.0 - phi**m) / (1.0 - phi)
            + g * g * phi * phi * (1.0 - phi ** (2.0 * m)) / (1.0 - phi * phi)
        )
        return float(var * (1.0 + max(total, 0.0)))

    def to_dict(self, state: HoltState) -> dict[str, Any]:
        return {
            "t": state.t,
            # Unrounded: five floats, and rounding them cost more time than they cost room.
            "l": state.level,
            "b": state.trend,
            "v": state.var,
            "n": min(state.n, 1_000_000),
            "es": state.es,
            "ea": state.ea,
        }

    def from_dict(self, data: dict[str, Any]) -> HoltState:
        t = data.get("t")
        return HoltState(
            t=None if t is None else float(t),
            level=float(data.get("l", 0.0)),
            trend=float(data.get("b", 0.0)),
            var=float(data.get("v", 0.0)),
            n=int(data.get("n", 0)),
            es=float(data.get("es", 0.0)),
            ea=float(data.get("ea", 0.0)),
        )


# ------------------------------------------------------------------------- seasonal


SeasonalityMode = Literal["Auto", "Daily", "None"]


@dataclass(frozen=True, slots=True)
class SeasonalState:
    holt: HoltState = HoltState()  # Holt on the deseasonalised rate (rate / profile)
    raw: HoltState = HoltState()  # Holt on the rate itself: the non-seasonal alternative
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

    holt: Holt = Holt()
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
            new_v = _r(clipped)
        else:
            # A day's worth of samples in a bin adds up to weight gamma; the first day's
            # samples average equally (weight floor dt/elapsed) so its first sample does
            # not stand for the whole bin.
            frac = min(dt / self._width(), 1.0)
            w = 1.0 - (1.0 - self.gamma) ** frac
            if t - first_t < DAY_SECONDS:
                into_bin = (t % self._width()) / self._width()
                w = max(w, min(frac / max(into_bin, frac), 1.0))
            new_v = _r(old + w * (clipped - old))
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
        return replace(state, check=(t + h, _r(by_profile), _r(plain), _r(used)))

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
            "es": _r(state.err_seasonal),
            "ep": _r(state.err_plain),
            "uv": _r(state.up_var),
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
        if not _NUMBERS.issuperset(map(type, parsed)):  # C-speed check: runs every call
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
