"""Non-seasonal token-rate forecasters with prediction intervals, updated online, and the
interface every forecaster shares (`forecast.py` adds the seasonal one and the registry).

    state = f.initial()
    state = f.update(state, t=..., value=...)       # one sample, time in Unix seconds
    fc = f.forecast(state, t=now, horizon=120.0)     # Forecast(mean, upper) at now + horizon
    f.to_dict(state) / f.from_dict(data)            # JSON-safe, compact (kept in status)

- `Naive`: the last value (baseline for MAPE).
- `Holt`: damped Holt (level + trend, damping phi) that accepts irregular sampling; the
  upper bound comes from a running one-step error variance, propagated to h steps with
  the closed-form variance of ETS(A,Ad,N). Residuals are winsorised at `clip` standard
  errors, so one minute-scale burst moves the level by at most alpha * clip * sigma.

Hand-written rather than statsmodels: updates must be incremental (one sample per call,
microseconds, state in a few hundred bytes of status) and robust to bursts; statsmodels'
ExponentialSmoothing refits on the whole history every time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

# Smoothing constants are per reference step; irregular gaps are converted to steps.
STEP_SECONDS = 15.0

S = TypeVar("S")
NUMBER_TYPES = frozenset((int, float, type(None)))


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


def round6(x: float) -> float:
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
        return {"t": state.t, "v": round6(state.value)}

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
    track_alpha: float = 0.15  # EWMA weight of the tracking signal's two averages
    clip: float = 2.5  # residuals winsorised at this many standard errors
    z: float = 1.645
    var_alpha: float = 0.08  # EWMA weight of the one-step error variance
    warmup: int = 8  # samples before clipping applies
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
