"""What the recommender learns about its own mistakes: forecast error and SLO misses.

- `ForecastError`: each forecast of the demand at now + horizon is kept until its time
  comes; then the demand actually seen is compared with it. The upper quantile of
  log(actual / forecast) (a running mean plus `z` upside deviations) gives the factor the
  forecast mean is multiplied by: the headroom the forecast needs, measured instead of
  assumed. Until `min_count` forecasts have matured: None (the forecaster's own interval
  is used).
- `SloMisses`: a correction on the usable capacity from observed SLO misses. Every sample
  whose P99 (the worst of the watched signals, as a share of its SLO) is over 1 with
  demand present multiplies it by `cut`; every calm sample (below `calm` of the SLO)
  lets it recover by `recover`, up to 1. A miss the capacity model cannot explain (a
  burst, a mix change) therefore still asks for more replicas, and forgets it slowly.

Both are a few numbers of state (the pending forecasts: horizon / 15 s entries). Pure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple


def _r(x: float) -> float:
    return float(f"{x:.6g}")


class ErrorState(NamedTuple):
    pending: tuple[tuple[float, float], ...] = ()  # (due time, forecast mean)
    n: int = 0
    mean: float = 0.0  # EWMA of log(actual / forecast)
    up: float = 0.0  # EWMA of the squared upside deviation from `mean` (x2)
    # With ForecastError.bias_repeat_s: when the last error over the bias clip was
    # scored (None: never), and whether its event is learned whole (a repeat).
    last_big: float | None = None
    whole: bool = False


# Errors over the bias clip scored within this many seconds of the last one belong to the
# same event (a step's horizon of forecasts, 9 at 140 s, comes in one run; so does a burst).
EVENT_GAP_S = 60.0


@dataclass(frozen=True, slots=True)
class ForecastError:
    alpha: float = 0.05  # EWMA weight of one matured forecast
    # Upside deviations covered when `factor` is given no `z`; the policy gives its own,
    # PolicyConfig.forecast_error_z (0.5 since the sixth split, docs/policy.md). Earlier,
    # 1.0 (one-sided ~84 %): with 1.645 the tuning traces cost
    # 1.36-1.71x the oracle instead of 1.29-1.57x, at the same window attainment.
    z: float = 1.0
    min_count: int = 8
    max_factor: float = 2.5
    keep: int = 40  # pending forecasts kept at most (a horizon of 10 min at 15 s)
    # The running mean of log(actual / forecast) (the forecast's bias) learns each scored
    # error clipped to at most this; the upside deviation still reads the whole error. One
    # step no history foretold is scored by every forecast made in the horizon before it
    # (9 at 140 s and 15 s passes), and at `alpha` 0.05 those 9 lift the mean by about a
    # third of the step: on servegen-m-large-d9-morning seed 0 the factor went x1.03 ->
    # x1.53 within two minutes of a step from 1,000 to 2,300 tok/s and asked for 13-14
    # replicas where 7-9 were needed (docs/policy.md, "Thirty-ninth round"). 0.2 (a
    # forecast low by up to x1.22 counts in full) with `bias_repeat_s` 600 since the
    # fortieth round: 1 window fewer and 0.0059x of the oracle's cost less over the 120
    # tuning cases (docs/policy.md, "Fortieth round"). None: off (the mean reads the whole
    # error, clipped at +-2 as every error is; `bias_repeat_s` must then be None too).
    bias_clip: float | None = 0.2
    # With a bias clip: an event of errors over the clip (errors scored within
    # EVENT_GAP_S of each other) is learned whole when the event before it ended at most
    # this many seconds before it began: a load that keeps bursting (azure-code, every
    # 4-7 minutes) is a bias the forecast has, where one step is not (docs/policy.md,
    # "Fortieth round"; 600 since). None: every error over the clip is clipped.
    bias_repeat_s: float | None = 600.0

    def __post_init__(self) -> None:
        if self.bias_clip is not None and not 0.0 < self.bias_clip <= 2.0:
            raise ValueError(
                f"bias_clip {self.bias_clip!r}: give the largest log error the forecast's "
                "bias learns, 0 < x <= 2 (None: the whole error)"
            )
        if self.bias_repeat_s is not None:
            if self.bias_clip is None:
                raise ValueError(
                    f"bias_repeat_s {self.bias_repeat_s!r} needs a bias_clip: give both, or "
                    "leave bias_repeat_s None"
                )
            if not EVENT_GAP_S < self.bias_repeat_s <= 3600.0:
                raise ValueError(
                    f"bias_repeat_s {self.bias_repeat_s!r}: give the seconds within which an "
                    f"event of large errors counts as a repeat, {EVENT_GAP_S:g} < s <= 3600 "
                    "(None: every such event is clipped)"
                )

    def update(
        self,
        state: ErrorState,
        *,
        t: float,
        actual: float,
        forecast: float,
        horizon: float,
    ) -> ErrorState:
        """Score the forecasts due by `t` against `actual`, then remember `forecast`
        (the demand predicted for t + horizon)."""
        pending = list(state.pending)
        n, mean, up = state.n, state.mean, state.up
        last_big, whole = state.last_big, state.whole
        while pending and pending[0][0] <= t:
            _, predicted = pending.pop(0)
            eps = max(1.0, 0.01 * max(predicted, actual))
            x = math.log((max(actual, 0.0) + eps) / (max(predicted, 0.0) + eps))
            x = min(max(x, -2.0), 2.0)  # one outage or restart does not dominate
            w = self.alpha if n >= self.min_count else 1.0 / (n + 1)
            learned = x
            if self.bias_clip is not None and x > self.bias_clip:
                if self.bias_repeat_s is not None:
                    if last_big is None or t - last_big > EVENT_GAP_S:  # a new event
                        whole = last_big is not None and t - last_big <= self.bias_repeat_s
                    last_big = t
                if not (whole and self.bias_repeat_s is not None):
                    learned = self.bias_clip
            mean += w * (learned - mean)
            dev = max(x - mean, 0.0)
            up += w * (2.0 * dev * dev - up)
            n = min(n + 1, 1_000_000)
        pending.append((_r(t + horizon), _r(max(forecast, 0.0))))
        return ErrorState(
            pending=tuple(pending[-self.keep :]),
            n=n,
            mean=_r(mean),
            up=_r(max(up, 0.0)),
            last_big=None if last_big is None else _r(last_big),
            whole=whole,
        )

    def factor(self, state: ErrorState, *, z: float | None = None) -> float | None:
        """What the forecast mean is multiplied by to cover its upside error (None:
        not enough forecasts scored yet). `z`:
        the upside deviations covered (None: this model's `z`)."""
        if state.n < self.min_count:
            return None
        dev = self.z if z is None else z
        if not dev >= 0.0:  # also refuses NaN
            raise ValueError(f"forecast_error_z {dev!r}: give a number of deviations >= 0")
        f = math.exp(state.mean + dev * math.sqrt(state.up))
        return min(max(f, 1.0), self.max_factor)

    def to_dict(self, state: ErrorState) -> dict[str, Any]:
        return {
            "p": [list(x) for x in state.pending],
            "n": state.n,
            "m": state.mean,
            "u": state.up,
            **({} if state.last_big is None else {"b": [state.last_big, state.whole]}),
        }

    def from_dict(self, data: dict[str, Any]) -> ErrorState:
        # A status written before the quantile and peak floors were removed may still
        # hold "q" and "k": ignored.
        return ErrorState(
            pending=tuple((float(t), float(v)) for t, v in data.get("p", ())),
            n=int(data.get("n", 0)),
            mean=float(data.get("m", 0.0)),
            up=float(data.get("u", 0.0)),
            last_big=float(data["b"][0]) if "b" in data else None,
            whole=bool(data["b"][1]) if "b" in data else False,
        )


@dataclass(frozen=True, slots=True)
class SloMisses:
    cut: float = 0.95
    recover: float = 1.01
    calm: float = 0.5
    floor: float = 0.7

    def update(self, correction: float, *, pressure: float | None, demand: bool) -> float:
        """`pressure`: the worst watched P99 as a share of its SLO (None: not measured)."""
        if pressure is None or not demand:
            return correction
        if pressure > 1.0:
            return _r(max(correction * self.cut, self.floor))
        if pressure < self.calm:
            return _r(min(correction * self.recover, 1.0))
        return correction
