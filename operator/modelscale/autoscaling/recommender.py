"""The predictive recommender: how many replicas a ModelDeployment needs, and why.

    recommendation, state = recommend(obs, config=config, state=state)

Pure and deterministic; time is `obs.now`. One call per ModelDeployment per loop (~15 s).

What it does, in order:
1. Metrics present and fresh? If not (token rate or sample time missing, or the newest
   sample older than `stale_after_seconds`), nothing is learned and nothing scales down:
   `Hold` keeps the current replicas; `Floor` raises them to at least `floor_replicas`
   (and never lowers them: missing metrics never cause a scale-down). Both stay within
   min/max. Reasons MetricsMissing / MetricsStale.
2. Learn from the new sample (only when `sample_time` advanced): the forecaster (seasonal
   profile x damped Holt) and the capacity model (load per *warmed* replica vs P99; pods
   still warming up are never counted as capacity).
3. Demand = max(forecast upper bound at now + horizon, token rate now); horizon =
   measured pod start-up time, or the spec's default until measured. Replicas = the
   smallest r with demand / r <= capacity x headroom AND predicted P99(demand / r) <= SLO.
4. React to reality: P99 over the SLO now -> at least one more than the warmed replicas
   (LatencySLO); a queue longer than `queue_depth_per_replica` per warmed replica that
   grew since the last sample -> the same (QueueBuildup).
5. Clamp to min/max, then stabilise like the HPA: scale up to the minimum of the
   recommendations of the last `scale_up_stabilization_seconds` (0: at once), scale down
   to the maximum of those of the last `scale_down_stabilization_seconds`, and only once
   recommendations have been recorded for a whole window; steps bounded by
   max_scale_up_step / max_scale_down_step.

The state (`ScalingState.model`, typed and serialised by `state.py`) holds the forecaster,
the capacity model, the two stabilisation windows as monotone queues (a few entries, not
raw history), the last queue depth and the last sample time: about 2 KB of JSON.
`ScalingState.decisions` keeps the last 10 *changes* (of replica count or reason), each
with its time.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from typing import NamedTuple

from modelscale.autoscaling import checks
from modelscale.autoscaling import forecast as forecast_mod
from modelscale.autoscaling import state as state_mod
from modelscale.autoscaling.checks import (
    METRIC_CHECKS,
    SCALE_DOWN_CHECKS,
    Blocked,
    first_block,
)
from modelscale.autoscaling.demand import (
    TPOT_SIGNAL,
    drained_recently,
    draining,
    latencies,
    latency_margin_short,
    latency_slo,
    learn_mix,
    pressure,
    queue_grew,
    secs,
    unserved_work,
    work_rate,
    zero_demand,
)
from modelscale.autoscaling.state import PolicyModel
from modelscale.autoscaling.types import (
    Decision,
    Observation,
    PolicyConfig,
    Recommendation,
    ScalingState,
)

FORECAST_TOKEN_RATE = "ForecastTokenRate"
LATENCY_SLO = "LatencySLO"
QUEUE_BUILDUP = "QueueBuildup"
METRICS_MISSING = checks.METRICS_MISSING
METRICS_STALE = checks.METRICS_STALE
METRICS_PARTIAL = checks.METRICS_PARTIAL
MIN_REPLICAS = "MinReplicas"
MAX_REPLICAS = "MaxReplicas"
SCALE_DOWN_STABILIZING = "ScaleDownStabilizing"
SCALE_UP_STABILIZING = "ScaleUpStabilizing"
LATENCY_MARGIN = "LatencyMargin"

KEEP_DECISIONS = 10
# Share of a rise since the last sample added on top of it (see recommend_for_forecast).
STEP_GAIN = 1.0
# Zero demand counts as none (the replicas go to minReplicas at once) after this many
# horizons of silence, the rate window's included (see recommend_for_forecast).
IDLE_HORIZONS = 2.0
# Larger readings are garbage, not load (a million replicas at a million tokens/s; a P99 of
# 11 days): learned as they are, 1e300 tokens/s made the forecaster's variance infinite,
# and status cannot hold infinity. Clipped, the policy asks for maxReplicas and says why.
MAX_RATE = 1e12
MAX_SECONDS = 1e6


def _clip(value: float | None, top: float) -> float | None:
    return None if value is None else min(value, top)


def _bounded(obs: Observation) -> Observation:
    return dataclasses.replace(
        obs,
        token_rate=_clip(obs.token_rate, MAX_RATE),
        prompt_token_rate=_clip(obs.prompt_token_rate, MAX_RATE),
        queue_depth=_clip(obs.queue_depth, MAX_RATE),
        p99_seconds=_clip(obs.p99_seconds, MAX_SECONDS),
        p99_tpot_seconds=_clip(obs.p99_tpot_seconds, MAX_SECONDS),
    )


def bootstrap(
    state: ScalingState, *, samples: Iterable[tuple[float, float]], config: PolicyConfig
) -> ScalingState:
    """Feed token-rate history (time, tokens/s), e.g. a Prometheus range query, into the
    forecaster so a new ModelDeployment or a lost status starts with a learned model."""
    m = state_mod.load(state.model, config=config)
    fc = m.fc
    last = m.sample_time
    for t, value in samples:
        if math.isfinite(value) and (last is None or t > last):
            fc = state_mod.FORECASTER.update(fc, t=t, value=value)
            last = t
    m = m._replace(fc=fc, sample_time=last)
    return ScalingState(
        last_scale_time=state.last_scale_time,
        decisions=state.decisions,
        model=state_mod.dump(m, config=config),
    )


def _replicas(n: int) -> str:
    return f"{n} replica" if n == 1 else f"{n} replicas"


def _ceil_replicas(need: float, config: PolicyConfig) -> int:
    """Replicas for `need` (a float, possibly huge); above maxReplicas it is maxReplicas + 1,
    so the clamp still says why, and math.ceil never sees infinity (OverflowError)."""
    if need > config.max_replicas:
        return config.max_replicas + 1
    return max(math.ceil(need - 1e-9), 0)


def _clamp(replicas: int, config: PolicyConfig) -> int:
    return min(max(replicas, config.min_replicas), config.max_replicas)


def _finish(
    *,
    obs: Observation,
    state: ScalingState,
    model: PolicyModel,
    rec: Recommendation,
    config: PolicyConfig,
) -> tuple[Recommendation, ScalingState]:
    model = _track_raised(obs, final=rec.replicas, config=config, model=model)
    decisions = state.decisions
    last = decisions[-1] if decisions else None
    # A decision is recorded when the replica count or the reason changes: ten entries
    # then tell the story of the last hours, not of the last 150 seconds.
    if last is None or (last.replicas, last.reason) != (rec.replicas, rec.reason):
        decisions = (
            *decisions,
            Decision(time=obs.now, replicas=rec.replicas, reason=rec.reason),
        )[-KEEP_DECISIONS:]
    scaled = rec.replicas != obs.current_replicas
    return rec, ScalingState(
        last_scale_time=obs.now if scaled else state.last_scale_time,
        decisions=decisions,
        model=state_mod.dump(model, config=config),
    )


def _recommend_without_metrics(
    *, obs: Observation, config: PolicyConfig, model: PolicyModel, blocked: Blocked
) -> tuple[Recommendation, PolicyModel]:
    current = obs.current_replicas
    if config.on_missing_metrics == "Floor":
        replicas = _clamp(max(current, config.floor_replicas), config)
        action = (
            f"raising to the floor of {config.floor_replicas}"
            if replicas > current
            else f"holding {replicas} replicas (Floor never scales down)"
        )
    else:
        replicas = _clamp(current, config)
        action = f"holding {replicas} replicas"
    # Record the held count in the windows: once metrics return, a scale-down still
    # waits a whole stabilisation window.
    model = state_mod.record_window(model, now=obs.now, replicas=replicas, config=config)
    return Recommendation(
        replicas=replicas,
        reason=blocked.reason,
        message=f"{blocked.message}; {action}, no scale-down without metrics",
    ), model


def _fleet(
    obs: Observation, *, config: PolicyConfig, fleet: tuple[int, float] | None
) -> tuple[int, float]:
    """The warmed fleet and the first sample time at its count (`PolicyModel.fleet`):
    growth starts it anew, a scale-down keeps its time."""
    assert obs.sample_time is not None
    if fleet is None and config.first_fleet_steady:
        return (obs.warmed_replicas, obs.sample_time - config.rate_window_seconds)
    if fleet is None or obs.warmed_replicas > fleet[0]:
        return (obs.warmed_replicas, obs.sample_time)
    if obs.warmed_replicas < fleet[0]:
        return (obs.warmed_replicas, fleet[1])
    return fleet


def _learn(
    obs: Observation, *, config: PolicyConfig, model: PolicyModel, backlog_draining: bool
) -> PolicyModel:
    assert obs.token_rate is not None and obs.sample_time is not None
    if model.sample_time is not None and obs.sample_time <= model.sample_time:
        return model  # the same sample as last time: nothing new to learn
    model = learn_mix(obs, model=model)
    if backlog_draining:
        return model._replace(sample_time=obs.sample_time)
    load = work_rate(obs, config=config, model=model)
    fc = state_mod.FORECASTER.update(model.fc, t=obs.sample_time, value=load)
    cap = model.cap
    adaptive = config.adaptive
    share = _learning_pressure(obs, config) if adaptive else obs.p99_seconds
    if adaptive and share is not None:
        share *= config.latency_slo_seconds  # every watched signal, in units of its SLO
    fleet = _fleet(obs, config=config, fleet=model.fleet)
    # Only a fleet that has not grown within the rate window teaches the capacity: just
    # after a scale-out the window's P99 still shows the backlog of the smaller fleet
    # while the load is already spread over the larger one (azure-conv x4 learned 300
    # tok/s on a replica that sustains 690, and kept over 40 replicas where 9 sufficed).
    # A scale-down (one replica at a time) does not restart the wait: it would never end.
    steady = not adaptive or obs.sample_time - fleet[1] >= config.rate_window_seconds
    taught = _rising_load(load, share=share, config=config, model=model)
    if obs.warmed_replicas > 0 and share is not None and steady and taught is not None:
        cap = state_mod.capacity_model(config).observe(
            cap,
            load=taught / obs.warmed_replicas,
            p99=share,
            target=config.target_tokens_per_replica,
            slo=config.latency_slo_seconds,
            cliff=_cliff_share(obs, config),
        )
    correction = model.correction
    # The same for SLO misses: a miss while replicas are still starting, or before the
    # window has seen the new fleet, is the scale-out not done yet, not a capacity error.
    if adaptive and steady and obs.current_replicas <= obs.warmed_replicas:
        correction = state_mod.MISSES.update(
            correction,
            pressure=pressure(obs, config),
            demand=load > 0.0 and obs.warmed_replicas > 0,
        )
    peak = model.peak
    if adaptive:
        peak = state_mod.push_peak(
            peak,
            now=obs.sample_time,
            value=_round(load),
            keep=config.scale_down_peak_window_seconds,
        )
    return model._replace(
        fc=fc,
        cap=cap,
        sample_time=obs.sample_time,
        correction=correction,
        fleet=fleet,
        peak=peak,
    )


def _learning_pressure(obs: Observation, config: PolicyConfig) -> float | None:
    """The worst watched P99 as a share of its SLO, as the capacity model learns it: with
    `config.tpot_knee`, TPOT's share scaled so that `tpot_knee` x its SLO reads as the
    model's knee. None: none measured."""
    if config.tpot_knee <= 0.0:
        return pressure(obs, config)
    scale = state_mod.capacity_model(config).knee / config.tpot_knee
    shares = [
        p99 / slo * (scale if name == TPOT_SIGNAL else 1.0)
        for name, p99, slo in latencies(obs, config)
    ]
    return max(shares) if shares else None


def _rising_load(
    load: float, *, share: float | None, config: PolicyConfig, model: PolicyModel
) -> float | None:
    """The demand a sample teaches the capacity at (None: it teaches nothing). A sample
    past the knee taken while the demand rose since the previous sample is skipped above
    `config.capacity_rise_skip`, else taught at the mean plus
    `config.capacity_rise_extrapolate` x the rise (both 0 by default: the mean)."""
    skip, ahead = config.capacity_rise_skip, config.capacity_rise_extrapolate
    previous = model.rate
    if not config.adaptive or (skip <= 0.0 and ahead <= 0.0) or share is None:
        return load
    if previous is None or previous <= 0.0:
        return load
    if (
        load <= previous
        or share <= config.latency_slo_seconds * state_mod.capacity_model(config).knee
    ):
        return load
    if skip > 0.0 and load > previous * (1.0 + skip):
        return None
    return load + ahead * (load - previous)


def _cliff_share(obs: Observation, config: PolicyConfig) -> float | None:
    """The configured signal's P99 (TTFT: queueing, a cliff at saturation) in units of
    `latency_slo_seconds`, beside the worst of all watched signals, which may be the
    gradual TPOT (CapacityModel.served_cliff_below). None: not measured."""
    p99 = obs.p99_seconds
    if p99 is None or not math.isfinite(p99):
        return None
    return p99 / latency_slo(obs, config) * config.latency_slo_seconds


def _queue_hurts(obs: Observation, config: PolicyConfig) -> bool:
    """Whether a growing queue asks for a replica (`config.queue_buildup_cliff`): off,
    or the configured signal's P99 at least that share of its SLO, or not measured."""
    share = config.queue_buildup_cliff
    if share <= 0.0 or not config.adaptive:
        return True
    cliff = _cliff_share(obs, config)
    return cliff is None or cliff >= share * config.latency_slo_seconds


def _track_idle(obs: Observation, *, config: PolicyConfig, model: PolicyModel) -> PolicyModel:
    """Remember when the zero demand now seen began: the rate window before the first
    observation that saw none."""
    if not zero_demand(obs):
        return model._replace(idle_since=None) if model.idle_since is not None else model
    if model.idle_since is not None:
        return model
    return model._replace(idle_since=obs.now - config.rate_window_seconds)


def _score_forecast(
    obs: Observation, *, config: PolicyConfig, model: PolicyModel, need: ForecastNeed
) -> PolicyModel:
    """After a new sample: score the forecasts now due, remember this one."""
    assert obs.sample_time is not None
    load = work_rate(obs, config=config, model=model)
    err = state_mod.ERRORS.update(
        model.err,
        t=obs.sample_time,
        actual=load,
        forecast=need.forecast.mean,
        horizon=need.horizon,
    )
    return model._replace(err=err, rate=_round(load))


def _round(x: float) -> float:
    return float(f"{x:.6g}")


class ForecastNeed(NamedTuple):
    """What the forecast asks for, and the figures behind it."""

    replicas: int
    reason: str
    message: str
    forecast: forecast_mod.Forecast
    horizon: float  # seconds ahead the forecast looked
    predicted_p99: float | None  # P99 the latency curve predicts at `replicas`
    # Nothing served, prefilled or queued for IDLE_HORIZONS horizons, and no daily
    # profile that expects more: demand is zero and a scale-down need not wait.
    idle: bool = False


def _calm_released(now: float | None, *, config: PolicyConfig, model: PolicyModel) -> bool:
    """Whether the fleet has been calm for `config.untested_release_seconds` (see
    `_track_calm`): the untested reach then gives way to the small-fleet reach."""
    release = config.untested_release_seconds
    if release <= 0.0 or now is None or model.calm_since is None or model.loud_since is not None:
        return False
    return now - model.calm_since >= release


def _calm_share(obs: Observation, *, config: PolicyConfig, model: PolicyModel) -> float:
    """The share of its SLO the worst watched P99 may sit at for a sample to be calm:
    `config.untested_release_pressure_unraised` (when set) while the fleet runs more
    replicas than the most this policy scaled it up to within
    `config.untested_release_raised_seconds`, else `config.untested_release_pressure`."""
    unraised = config.untested_release_pressure_unraised
    if unraised <= 0.0:
        return config.untested_release_pressure
    keep = config.untested_release_raised_seconds
    recent = [r for t, r in model.raised if t > obs.now - keep]
    most = max(recent, default=0.0)
    return unraised if obs.current_replicas > most else config.untested_release_pressure


def _track_raised(
    obs: Observation, *, final: int, config: PolicyConfig, model: PolicyModel
) -> PolicyModel:
    """`PolicyModel.raised`: a decision that scales the fleet up to `final` is
    remembered for `config.untested_release_raised_seconds` (with
    `config.untested_release_pressure_unraised` set; else nothing is kept)."""
    if config.untested_release_pressure_unraised <= 0.0:
        return model if not model.raised else model._replace(raised=())
    if final <= obs.current_replicas:
        return model
    keep = config.untested_release_raised_seconds
    raised = state_mod.push_peak(model.raised, now=obs.now, value=float(final), keep=keep)
    return model._replace(raised=raised)


def _track_calm(obs: Observation, *, config: PolicyConfig, model: PolicyModel) -> PolicyModel:
    """`PolicyModel.calm_since`: the first sample time since which every sample's worst
    watched P99 was at most `config.untested_release_pressure` of its SLO with no queue
    over `config.queue_depth_per_replica` per warmed replica. A sample without a P99 or
    with a P99 past that share starts it anew, unless `config.untested_release_grace_seconds`
    tolerates it (a run of such samples shorter than the grace, none past
    `config.scale_down_latency_margin` and none queued: `PolicyModel.loud_since` keeps the
    run's start); off: None."""
    if config.untested_release_seconds <= 0.0 or not config.adaptive:
        return model if model.calm_since is None else model._replace(calm_since=None)
    if obs.sample_time is None or (
        model.sample_time is not None and obs.sample_time <= model.sample_time
    ):
        return model  # no new sample: nothing new about the fleet
    share = pressure(obs, config)
    allowance = config.queue_depth_per_replica * max(obs.warmed_replicas, 1)
    queued = obs.queue_depth is not None and obs.queue_depth > allowance
    if share is not None and share <= _calm_share(obs, config=config, model=model) and not queued:
        if model.loud_since is not None:
            model = model._replace(loud_since=None)
        if model.calm_since is None:
            return model._replace(calm_since=obs.sample_time)
        return model
    grace = config.untested_release_grace_seconds
    if grace > 0.0 and share is not None and not queued:
        loud = obs.sample_time if model.loud_since is None else model.loud_since
        if share <= config.scale_down_latency_margin and obs.sample_time - loud < grace:
            return model if model.loud_since == loud else model._replace(loud_since=loud)
    if model.calm_since is None and model.loud_since is None:
        return model
    return model._replace(calm_since=None, loud_since=None)


def _within_tested_load(
    replicas: int,
    *,
    current: int,
    demand: float,
    config: PolicyConfig,
    model: PolicyModel,
    obs_time: float | None = None,
) -> tuple[int, float]:
    """The fewest replicas, at least `replicas` and at most `current`, that load each with
    at most `config.scale_down_reach` x the heaviest load per replica seen within the SLO
    (`CapacityModel.tested_load`); where that leaves `config.scale_down_small_fleet`
    replicas or fewer, at most `config.scale_down_reach_small` x it (when set), and at
    most `config.scale_down_reach_untested` x it (when set; where it leaves
    `config.scale_down_untested_fleet` or fewer, when that is set) while no load past the
    knee has been seen (nor, with `config.queue_is_limit`, a queue grow on warmed pods)
    and the fleet has not been calm for `config.untested_release_seconds` by `obs_time`
    (where it leaves `config.untested_release_fleet` or more). With the reach that
    decided. No such load seen yet: `replicas` (the other guards, the
    window and the latency margin, still apply)."""
    reach = config.scale_down_reach
    capacity = state_mod.capacity_model(config)
    target, slo = config.target_tokens_per_replica, config.latency_slo_seconds
    tested = capacity.tested_load(model.cap, target=target, slo=slo)
    if tested is None or tested <= 0.0:
        return replicas, reach
    kept = max(replicas, _ceil_replicas(demand / (reach * tested), config))
    if config.scale_down_reach_small and kept <= config.scale_down_small_fleet:
        small_reach = config.scale_down_reach_small
        untested_fleet = config.scale_down_untested_fleet or config.scale_down_small_fleet
        limit = capacity.limit_seen(model.cap, target=target, slo=slo) or (
            config.queue_is_limit and model.saturated
        )
        if (
            config.scale_down_reach_untested
            and kept <= untested_fleet
            and not limit
            and not (
                kept >= config.untested_release_fleet
                and _calm_released(obs_time, config=config, model=model)
            )
        ):
            small_reach = config.scale_down_reach_untested
        small = _ceil_replicas(demand / (small_reach * tested), config)
        if small > kept:
            kept, reach = small, small_reach
    return min(current, kept), reach


def _swing_demand(
    obs: Observation, *, demand: float, usable: float, config: PolicyConfig, model: PolicyModel
) -> float | None:
    """What a scale-down must still fit under `config.scale_down_swing_seconds`: the
    heaviest load served in that window (the sliding max `model.peak` keeps) and at least
    `config.scale_down_swing_floor` x `demand` more than the demand. With
    `config.scale_down_swing_reach`, only where that load per replica kept is at most
    that multiple of the heaviest load per replica seen within the SLO (the capacity's
    error, not only the demand's swing, is what the fixed margin covers past it). None
    when off, nothing has been sampled or the load is untested: the fixed hysteresis
    applies."""
    window = config.scale_down_swing_seconds
    if window <= 0.0 or not config.adaptive or obs.sample_time is None:
        return None
    # The entries' values fall with time, so the first inside the window is its max.
    recent = [v for t, v in model.peak if t > obs.sample_time - window]
    if not recent:
        return None
    covered = max(recent[0], demand * (1.0 + config.scale_down_swing_floor))
    reach = config.scale_down_swing_reach
    if reach > 0.0:
        capacity = state_mod.capacity_model(config)
        tested = capacity.tested_load(
            model.cap, target=config.target_tokens_per_replica, slo=config.latency_slo_seconds
        )
        kept = max(math.ceil(covered / usable - 1e-9), 1)
        if tested is None or covered / kept > reach * tested:
            return None
    return covered


def recommend_for_forecast(
    obs: Observation,
    *,
    config: PolicyConfig,
    model: PolicyModel,
    backlog_draining: bool = False,
    previous_queue: float | None = None,
    sample_gap: float = 0.0,
) -> ForecastNeed:
    """Replicas the forecast needs."""
    assert obs.token_rate is not None
    horizon = obs.measured_horizon_seconds or config.default_horizon_seconds
    fc = state_mod.FORECASTERS[config.seasonality].forecast(model.fc, t=obs.now, horizon=horizon)
    # The rate served now counts too (the forecast lags a sudden rise), unless it is a
    # backlog being drained. A rise since the last sample is extrapolated: a step in
    # demand shows in a 1-minute rate only gradually (a quarter per 15 s), so the first
    # pass that sees it asks for the rest of it.
    now_rate = work_rate(obs, config=config, model=model)
    rising = 0.0 if model.rate is None else max(now_rate - model.rate, 0.0)
    adaptive = config.adaptive
    now_rate = min(now_rate + STEP_GAIN * rising, 2.0 * now_rate) if adaptive else now_rate
    # A queue growing on saturated pods is demand the served rate cannot show; added at
    # most once more than the rate (as the step response), since a queue also grows in
    # a burst shorter than a start-up. Not while a backlog drains (the rate is not demand).
    queued = 0.0
    if adaptive and not backlog_draining:
        queued = unserved_work(
            obs, config=config, model=model, previous_queue=previous_queue, gap=sample_gap
        )
        queued = min(queued, now_rate)
        now_rate += queued
    factor = state_mod.ERRORS.factor(model.err, z=config.forecast_error_z) if adaptive else None
    upper = fc.upper if factor is None else fc.mean * factor
    demand = upper if backlog_draining else max(upper, now_rate)
    idle = adaptive and zero_demand(obs) and not backlog_draining
    idle = idle and not state_mod.FORECASTERS[config.seasonality].uses_profile(model.fc)
    # ... for IDLE_HORIZONS horizons. A replica given back costs one horizon (start-up and
    # warm-up) to have again, and a burst that meets the replicas given back costs more
    # than that: it queues on the ones left, breaks the SLO until the others return, and
    # its backlog is served after them, about one horizon more. Waiting as long as that
    # costs at most what scaling down and back costs (the break-even rule of rent-or-buy:
    # at most twice the best choice in hindsight, whatever the gap). Scaling down on the
    # first idle rate window lost azure-code's bursts (22 % of windows); after one
    # horizon, its silences of 2-2.5 minutes still met one replica (68.9 %; two: 75.6 %).
    silent = None if model.idle_since is None else obs.now - model.idle_since
    idle = idle and silent is not None and silent >= IDLE_HORIZONS * horizon
    if idle:
        # Nothing served for that long and no daily profile that expects more: the
        # forecast's slowly decaying level is not demand.
        demand = 0.0
    target = config.target_tokens_per_replica
    capacity = state_mod.capacity_model(config)
    cap = capacity.capacity(model.cap, target=target)
    # The configured headroom covers the prior; once the pods' metrics have located the
    # knee, the margin is the measured forecast error, the SLO-miss correction and the
    # learned headroom.
    if model.cap.capacity is None or not adaptive:
        share = config.headroom
    else:
        share = config.learned_headroom
    usable = cap * share * model.correction
    replicas = _ceil_replicas(demand / usable, config) if usable > 0 else config.max_replicas
    replicas = max(replicas, 1) if demand > 0 else replicas
    margin = f"x{factor:.2f} measured error" if factor is not None else f"upper {fc.upper:.0f}"
    message = (
        f"forecast {fc.mean:.0f} tok/s ({margin}) in {horizon:.0f} s, "
        f"now {now_rate:.0f} tok/s"
        + (f" ({queued:.0f} of it queued, not served)" if queued > 0.0 else "")
        + f": needs {_replicas(replicas)} at "
        f"{share * model.correction:.0%} of {cap:.0f} tok/s"
    )
    current = obs.current_replicas
    if 0 < replicas < current and usable > 0 and not idle and config.scale_down_hysteresis > 0:
        # Fewer replicas only with room to spare: demand that jitters around a replica
        # boundary would otherwise give one back and want it again a minute later, and
        # a replica takes the whole horizon to return.
        spare_demand = demand * config.scale_down_hysteresis
        swing = _swing_demand(obs, demand=demand, usable=usable, config=config, model=model)
        covered = demand + spare_demand if swing is None else min(demand + spare_demand, swing)
        kept = min(current, math.ceil(covered / usable - 1e-9))
        if kept > replicas:
            if swing is None or covered >= demand + spare_demand:
                message += (
                    f"; keeping {_replicas(kept)}: fewer need "
                    f"{config.scale_down_hysteresis:.0%} of spare demand to scale down"
                )
            else:
                message += (
                    f"; keeping {_replicas(kept)}: fewer would not fit {covered:.0f} tok/s, "
                    f"the heaviest load of the last {config.scale_down_swing_seconds:.0f} s "
                    f"or {config.scale_down_swing_floor:.0%} of spare demand"
                )
            replicas = kept
    if 0 < replicas < current and adaptive and not idle and model.peak and usable > 0:
        heaviest = model.peak[0][1]
        kept = min(
            current, _ceil_replicas(config.scale_down_peak_share * heaviest / usable, config)
        )
        if kept > replicas:
            message += (
                f"; keeping {_replicas(kept)}: demand fell from {heaviest:.0f} tok/s within "
                f"{config.scale_down_peak_window_seconds:.0f} s, and a sharp fall is often "
                f"followed by a rebound (fewer serve under "
                f"{config.scale_down_peak_share:.0%} of it)"
            )
            replicas = kept
    if 0 < replicas < current and adaptive and not idle:
        kept, reach = _within_tested_load(
            replicas,
            current=current,
            demand=demand,
            config=config,
            model=model,
            obs_time=obs.sample_time,
        )
        if kept > replicas:
            message += (
                f"; keeping {_replicas(kept)}: fewer would load each beyond "
                f"{reach:g}x the heaviest load per replica seen within the SLO"
            )
            replicas = kept
    curve = capacity.latency_curve(model.cap, target=target)
    predicted = curve.p99(demand / replicas) if replicas > 0 else None
    if predicted is not None and predicted > config.latency_slo_seconds:
        r = replicas
        while r < config.max_replicas:
            r += 1
            p = curve.p99(demand / r)
            if p is None or p <= config.latency_slo_seconds:
                predicted = p
                break
        message += (
            f"; predicted P99 at {demand / replicas:.0f} tok/s per replica is over the "
            f"{config.latency_slo_seconds:g} s SLO: {r} replicas"
        )
        replicas = r
    return ForecastNeed(
        replicas=replicas,
        reason=FORECAST_TOKEN_RATE,
        message=message,
        forecast=fc,
        horizon=horizon,
        predicted_p99=predicted,
        idle=idle,
    )


def recommend_for_reality(
    obs: Observation, *, config: PolicyConfig, model: PolicyModel
) -> Blocked | None:
    """Latency or queue already bad now: at least one replica beyond the warmed ones."""
    for name, p99, slo in latencies(obs, config):
        if p99 > slo:
            return Blocked(
                LATENCY_SLO,
                f"{name} {secs(p99)} s is over the {slo:g} s SLO "
                f"with {obs.warmed_replicas} warmed replicas",
            )
    q = obs.queue_depth
    if (
        q is not None
        and queue_grew(obs, config=config, previous_queue=model.queue)
        and _queue_hurts(obs, config)
    ):
        return Blocked(
            QUEUE_BUILDUP,
            f"queue grew from {model.queue:.0f} to {q:.0f} waiting requests on "
            f"{obs.warmed_replicas} warmed replicas",
        )
    return None


def recommend(
    obs: Observation, *, config: PolicyConfig, state: ScalingState
) -> tuple[Recommendation, ScalingState]:
    obs = _bounded(obs)
    model = state_mod.load(state.model, config=config)
    blocked = first_block(obs, config, METRIC_CHECKS)
    if blocked is not None:
        rec, model = _recommend_without_metrics(
            obs=obs, config=config, model=model, blocked=blocked
        )
        return _finish(obs=obs, state=state, model=model, rec=rec, config=config)

    previous_queue = model.queue
    falling = draining(obs, config=config, previous_queue=previous_queue)
    remembered = not falling and drained_recently(obs, config=config, drained=model.drained)
    backlog = falling or remembered
    if falling and obs.sample_time is not None:
        model = model._replace(drained=obs.sample_time)
    if obs.warmed_replicas > 0 and queue_grew(obs, config=config, previous_queue=previous_queue):
        model = model._replace(saturated=True)  # the pods serving were past their limit
    seen = model.sample_time
    fresh = obs.sample_time is not None and (seen is None or obs.sample_time > seen)
    model = _track_calm(obs, config=config, model=model)
    model = _learn(obs, config=config, model=model, backlog_draining=backlog)
    model = _track_idle(obs, config=config, model=model)
    gap = 0.0 if seen is None or obs.sample_time is None else obs.sample_time - seen
    need = recommend_for_forecast(
        obs,
        config=config,
        model=model,
        backlog_draining=backlog,
        previous_queue=previous_queue,
        sample_gap=gap,
    )
    # Forecasts made before the forecaster has seen its warm-up samples are not scored:
    # a model that has seen one minute of traffic misses any ramp, and its errors (x1.7
    # on azure-conv x4's first minutes) would set the measured headroom for an hour.
    learned = model.fc.raw.n >= state_mod.FORECASTER.holt.warmup
    if fresh and not backlog and learned:
        model = _score_forecast(obs, config=config, model=model, need=need)
    elif fresh and not backlog:
        model = model._replace(rate=_round(work_rate(obs, config=config, model=model)))
    replicas, reason, message = need.replicas, need.reason, need.message
    if falling:
        message += (
            f"; queue draining ({previous_queue:.0f} -> {obs.queue_depth:.0f}): the served "
            f"{obs.token_rate:.0f} tok/s is not learned as demand"
        )
    elif remembered:
        assert model.drained is not None and obs.sample_time is not None
        message += (
            f"; a backlog drained {obs.sample_time - model.drained:.0f} s ago is still in the "
            f"rate window: the served {obs.token_rate:.0f} tok/s is not learned as demand"
        )
    urgent = recommend_for_reality(obs, config=config, model=model)  # model.queue: previous
    if urgent is not None:
        floor = max(obs.current_replicas, obs.warmed_replicas + 1)
        share = pressure(obs, config)
        pending = obs.current_replicas > obs.warmed_replicas
        # The rate window has seen only the warmed fleet of now (no pod joined within it):
        # its P99 measures this fleet, not the backlog of a smaller one.
        steady = model.fleet is not None and (
            obs.sample_time is not None
            and obs.sample_time - model.fleet[1]
            >= config.rate_window_seconds * config.burst_steady_windows
            # Pods that joined while a backlog drained are not in the record yet.
            and (not config.burst_fleet_seen or model.fleet[0] >= obs.warmed_replicas)
        )
        if (
            urgent.reason == LATENCY_SLO
            and share is not None
            and config.adaptive
            and (steady or (not pending and not config.burst_needs_steady_fleet))
            and not (backlog and config.burst_skips_backlog)
        ):
            # Far over the SLO is far over capacity: one replica at a time would take a
            # horizon per replica to catch up with a step in demand. Not again once
            # replicas it asked for have joined within the rate window: the P99 of the
            # window lags, and multiplying on every such pass took azure-conv x4 from 13
            # to 47 replicas. A replica starting for another reason does not hold it: a
            # step in prompt length on servegen-m-large broke TPOT by 1.5-2x for four
            # windows while one replica the forecast wanted was starting.
            cap = config.burst_cap
            floor = max(floor, math.ceil(obs.warmed_replicas * min(share, cap) - 1e-9))
        if floor > replicas:
            replicas, reason = floor, urgent.reason
            message = f"{urgent.message}: {replicas} replicas ({message})"
    if obs.queue_depth is not None:
        model = model._replace(queue=obs.queue_depth)

    clamped = _clamp(replicas, config)
    if clamped != replicas:
        bound = "min" if clamped > replicas else "max"
        reason = MIN_REPLICAS if bound == "min" else MAX_REPLICAS
        message = f"{message}; clamped to {bound}Replicas {clamped}"
    model = state_mod.record_window(model, now=obs.now, replicas=clamped, config=config)

    current = obs.current_replicas
    final = clamped
    if clamped > current:
        stable_up = _clamp(min(r for _, r in model.up), config)
        final = min(max(stable_up, current), current + config.max_scale_up_step)
        if final < clamped:
            if stable_up < clamped:
                reason = SCALE_UP_STABILIZING
            message = f"{message}; scaling up to {final} now (step/stabilisation limit)"
    elif clamped < current:
        stable_down = _clamp(max(r for _, r in model.down), config)
        window = config.scale_down_stabilization_seconds
        covered = model.since is not None and obs.now - model.since >= window
        near_slo = latency_margin_short(obs, config)
        starting = current - obs.warmed_replicas
        partial = first_block(obs, config, SCALE_DOWN_CHECKS)
        if partial is not None:
            final = current
            reason = partial.reason
            message = f"{message}; holding {current}, no scale-down on partial data: "
            message += partial.message
        elif (
            config.adaptive
            and config.cancel_starting_replicas
            and starting > 0
            and near_slo is None
            and not need.idle
        ):
            # Replicas still starting that the forecast no longer needs are cancelled at
            # once (Kubernetes deletes not-ready pods first): they serve nothing yet, so
            # the stabilisation window that protects serving capacity does not apply.
            final = max(clamped, obs.warmed_replicas)
            message = (
                f"{message}; cancelling {_replicas(current - final)} still starting "
                "that the forecast no longer needs"
            )
        elif need.idle:
            # Zero demand for IDLE_HORIZONS horizons: the stabilisation window guards against
            # demand that jitters, and there is none. Waiting it out kept 3 replicas
            # for minutes after the load stopped (issue 11).
            final = clamped
            message = (
                f"{message}; no demand for {IDLE_HORIZONS:g} horizons: scaling down to {final} now"
            )
        elif config.adaptive and zero_demand(obs):
            # A silence not yet IDLE_HORIZONS long: it ends in a burst or becomes no demand
            # (then every replica goes at once); removing them one by one meanwhile
            # leaves the burst too few (azure-code: 6 -> 1 during a 3-minute silence).
            final = current
            reason = SCALE_DOWN_STABILIZING
            message = f"{message}; holding {current} through a silence shorter than "
            message += f"{IDLE_HORIZONS:g} horizons"
        elif near_slo is not None:
            final = current
            reason = LATENCY_MARGIN
            message = f"{message}; holding {current}: {near_slo}"
        elif not covered:
            final = current
            reason = SCALE_DOWN_STABILIZING
            seen = 0.0 if model.since is None else obs.now - model.since
            message = (
                f"{message}; holding {current}: scale-down waits until recommendations "
                f"cover the {window:.0f} s window ({seen:.0f} s so far)"
            )
        elif stable_down >= current:
            final = current
            reason = SCALE_DOWN_STABILIZING
            message = (
                f"{message}; holding {current}: {stable_down} was recommended within the "
                f"last {window:.0f} s"
            )
        else:
            final = max(stable_down, current - config.max_scale_down_step)
            message = f"{message}; scaling down to {final} (at most "
            message += f"{config.max_scale_down_step} per decision)"

    rec = Recommendation(
        replicas=final,
        reason=reason,
        message=message,
        forecast_token_rate=need.forecast.mean,
        forecast_p99_seconds=need.predicted_p99,
        horizon_seconds=need.horizon,
    )
    return _finish(obs=obs, state=state, model=model, rec=rec, config=config)
