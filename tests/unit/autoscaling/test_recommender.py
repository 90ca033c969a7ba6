"""Recommender: ahead of ramps, holds on missing metrics, stabilisation, limits, reasons."""

from __future__ import annotations

import itertools
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import pytest
from fixed_policy import FIXED_CAPACITY, T0, observation

from modelscale.autoscaling import recommender
from modelscale.autoscaling.types import PolicyConfig, Recommendation, ScalingState

CONFIG = replace(
    FIXED_CAPACITY,
    max_scale_up_step=100,
    max_scale_down_step=1,
    # The stabilisation tests below watch the window alone; hysteresis has its own tests.
    scale_down_hysteresis=0.0,
)


obs = observation


@dataclass
class Run:
    times: list[float]
    rates: list[float]
    recs: list[Recommendation]
    state: ScalingState


def simulate(
    rate: Callable[[float], float],
    *,
    seconds: float,
    start_replicas: int = 1,
    config: PolicyConfig = CONFIG,
    state: ScalingState | None = None,
    via_json: bool = False,
) -> Run:
    """Every 15 s; pods are warmed at once (startup is the simulator's business)."""
    st = state or ScalingState()
    replicas = start_replicas
    run = Run([], [], [], st)
    for i in range(int(seconds // 15)):
        now = T0 + 15 * i
        r = rate(now - T0)
        rec, st = recommender.recommend(
            obs(now, rate=r, replicas=replicas), config=config, state=st
        )
        if via_json:
            st = ScalingState.from_dict(json.loads(json.dumps(st.to_dict())))
        replicas = rec.replicas
        run.times.append(now - T0)
        run.rates.append(r)
        run.recs.append(rec)
    run.state = st
    return run


def needed(rate: float) -> int:
    return math.ceil(rate / (CONFIG.target_tokens_per_replica * CONFIG.headroom))


def ramp(t: float) -> float:
    """400 tok/s for 10 min, then +8 tok/s per second for 20 min, then flat."""
    return 400.0 + 8.0 * min(max(t - 600.0, 0.0), 1200.0)


def test_scales_up_ahead_of_a_ramp() -> None:
    run = simulate(ramp, seconds=2400)
    for n in range(2, needed(ramp(1800)) + 1):
        needed_at = next(t for t, r in zip(run.times, run.rates, strict=True) if needed(r) >= n)
        if needed_at < 600 + 180:
            continue  # the first 3 minutes of the ramp cannot be foreseen from a flat line
        ready_at = next(t for t, rec in zip(run.times, run.recs, strict=True) if rec.replicas >= n)
        # Recommended at least 60 s before the load needs it (half the 120 s horizon).
        assert ready_at <= needed_at - 60, f"replica {n}: asked at {ready_at}, needed {needed_at}"


def test_forecast_recommendation_explains_itself() -> None:
    run = simulate(ramp, seconds=1200)
    rec = run.recs[-1]
    assert rec.reason == recommender.FORECAST_TOKEN_RATE
    assert "tok/s" in rec.message and f"needs {rec.replicas} replicas" in rec.message
    assert rec.horizon_seconds == 120.0
    assert rec.forecast_token_rate is not None and rec.forecast_token_rate > run.rates[-1]


def test_measured_horizon_replaces_the_default() -> None:
    rec, _ = recommender.recommend(
        obs(T0, rate=100.0, replicas=1, horizon=200.0), config=CONFIG, state=ScalingState()
    )
    assert rec.horizon_seconds == 200.0
    assert "in 200 s" in rec.message


def busy_then_quiet(t: float) -> float:
    return 8000.0 if t < 900 else 1000.0


def test_scale_down_waits_for_the_window_then_steps_one_at_a_time() -> None:
    run = simulate(busy_then_quiet, seconds=2400, start_replicas=10)
    busy = run.recs[59].replicas  # 885 s
    assert busy >= needed(8000.0)
    first_down = next(
        t for t, rec in zip(run.times, run.recs, strict=True) if t > 900 and rec.replicas < busy
    )
    assert first_down >= 900 + CONFIG.scale_down_stabilization_seconds
    for prev, cur in itertools.pairwise(run.recs):
        assert cur.replicas >= prev.replicas - CONFIG.max_scale_down_step
    assert run.recs[-1].replicas == needed(1000.0)


def test_held_scale_down_says_why() -> None:
    run = simulate(busy_then_quiet, seconds=960, start_replicas=10)
    rec = run.recs[-1]
    assert rec.replicas == run.recs[59].replicas  # as when busy
    assert rec.reason == recommender.SCALE_DOWN_STABILIZING
    assert "300 s" in rec.message


def test_no_scale_down_before_a_whole_window_was_recorded() -> None:
    """A fresh state (new ModelDeployment, or lost status) must not scale down at once."""
    rec, _ = recommender.recommend(
        obs(T0, rate=10.0, replicas=6), config=CONFIG, state=ScalingState()
    )
    assert rec.replicas == 6


def warmed_up_state(replicas: int) -> ScalingState:
    return simulate(lambda t: 700.0 * replicas, seconds=900, start_replicas=replicas).state


@pytest.mark.parametrize(
    ("rate", "age", "behaviour", "floor", "want", "reason"),
    [
        pytest.param(None, 5.0, "Hold", 1, 5, recommender.METRICS_MISSING, id="missing-hold"),
        pytest.param(100.0, 600.0, "Hold", 1, 5, recommender.METRICS_STALE, id="stale-hold"),
        pytest.param(None, 5.0, "Floor", 8, 8, recommender.METRICS_MISSING, id="missing-floor-up"),
        pytest.param(
            100.0, 600.0, "Floor", 2, 5, recommender.METRICS_STALE, id="stale-floor-never-down"
        ),
    ],
)
def test_missing_or_stale_metrics_never_scale_down(  # noqa: PLR0917 (one table row)
    rate: float | None, age: float, behaviour: str, floor: int, want: int, reason: str
) -> None:
    config = replace(CONFIG, on_missing_metrics=behaviour, floor_replicas=floor)  # type: ignore[arg-type]
    state = warmed_up_state(5)
    now = T0 + 900
    rec, after = recommender.recommend(
        obs(now, rate=rate, replicas=5, age=age), config=config, state=state
    )
    assert (rec.replicas, rec.reason) == (want, reason)
    assert "no scale-down" in rec.message
    # Nothing was learned from the missing/stale sample.
    assert after.model["fc"] == state.model["fc"]


def test_stale_message_names_the_sample_time_and_stays_the_same_pass_after_pass() -> None:
    """The status is written only when it changes: a message with the sample's age in it
    would rewrite it on every pass of an outage."""
    state = warmed_up_state(5)
    now = T0 + 900
    messages = set()
    for i in range(4):  # the same stale sample, read on four passes
        rec, _ = recommender.recommend(
            obs(now + 15 * i, rate=100.0, replicas=5, age=600.0 + 15 * i),
            config=CONFIG,
            state=state,
        )
        assert rec.reason == recommender.METRICS_STALE
        messages.add(rec.message)
    (message,) = messages
    assert "staleAfterSeconds" in message, message
    assert time.strftime("%H:%M:%S", time.gmtime(now - 600.0)) in message, message


def test_scale_down_after_an_outage_waits_a_whole_window_again() -> None:
    state = warmed_up_state(5)
    replicas = 5
    now = T0 + 900
    for i in range(40):  # 10 minutes without metrics
        rec, state = recommender.recommend(
            obs(now + 15 * i, rate=None, replicas=replicas), config=CONFIG, state=state
        )
    back = now + 600
    for i in range(19):  # metrics back, load gone: still inside the window
        rec, state = recommender.recommend(
            obs(back + 15 * i, rate=50.0, replicas=replicas), config=CONFIG, state=state
        )
        assert rec.replicas == 5


@pytest.mark.parametrize(
    ("config", "rate", "start", "want", "reason"),
    [
        pytest.param(
            replace(CONFIG, max_scale_up_step=2),
            8000.0,
            1,
            3,
            recommender.FORECAST_TOKEN_RATE,
            id="up-step-limit",
        ),
        pytest.param(
            replace(CONFIG, max_replicas=4), 8000.0, 1, 4, recommender.MAX_REPLICAS, id="max"
        ),
        pytest.param(
            replace(CONFIG, min_replicas=3), 10.0, 3, 3, recommender.MIN_REPLICAS, id="min"
        ),
        pytest.param(CONFIG, 8000.0, 1, 10, recommender.FORECAST_TOKEN_RATE, id="jump"),
    ],
)
def test_limits(config: PolicyConfig, rate: float, start: int, want: int, reason: str) -> None:
    rec, _ = recommender.recommend(
        obs(T0, rate=rate, replicas=start), config=config, state=ScalingState()
    )
    assert (rec.replicas, rec.reason) == (want, reason)


def test_latency_over_slo_scales_up_now_even_if_the_forecast_is_fine() -> None:
    state = warmed_up_state(3)
    rec, _ = recommender.recommend(
        obs(T0 + 900, rate=2100.0, replicas=3, p99=3.5), config=CONFIG, state=state
    )
    assert rec.replicas == 4
    assert rec.reason == recommender.LATENCY_SLO
    assert "3.50 s" in rec.message


def test_latency_over_slo_waits_for_pods_already_starting() -> None:
    """3 warmed, 4 requested: the 4th is the extra replica; do not pile on more."""
    state = warmed_up_state(3)
    rec, _ = recommender.recommend(
        obs(T0 + 900, rate=2100.0, replicas=4, warmed=3, p99=3.5), config=CONFIG, state=state
    )
    assert rec.replicas == 4


def test_growing_queue_scales_up() -> None:
    state = warmed_up_state(2)
    _, state = recommender.recommend(
        obs(T0 + 900, rate=1400.0, replicas=2, queue=5.0), config=CONFIG, state=state
    )
    rec, _ = recommender.recommend(
        obs(T0 + 915, rate=1400.0, replicas=2, queue=12.0), config=CONFIG, state=state
    )
    assert (rec.replicas, rec.reason) == (3, recommender.QUEUE_BUILDUP)


def test_unwarmed_pods_do_not_count_as_capacity() -> None:
    """8 pods, 2 warmed, 3000 tok/s, P99 over the SLO: the load per replica is 1500
    (not 375); the capacity learned is near 1000, so ~4 replicas, not 13."""
    state = ScalingState()
    for i in range(40):
        _, state = recommender.recommend(
            obs(T0 + 15 * i, rate=3000.0, replicas=8, warmed=2, p99=3.0),
            config=CONFIG,
            state=state,
        )
    rec, _ = recommender.recommend(
        obs(T0 + 600, rate=3000.0, replicas=4, warmed=4, p99=None), config=CONFIG, state=state
    )
    assert rec.replicas <= 5


def test_state_round_trip_through_json_changes_nothing() -> None:
    direct = simulate(ramp, seconds=2400)
    via_json = simulate(ramp, seconds=2400, via_json=True)
    assert [r.replicas for r in direct.recs] == [r.replicas for r in via_json.recs]
    assert [r.reason for r in direct.recs] == [r.reason for r in via_json.recs]


def test_status_keeps_ten_decisions_and_stays_small() -> None:
    run = simulate(ramp, seconds=2 * 86400 // 4)
    assert len(run.state.decisions) == recommender.KEEP_DECISIONS
    assert run.state.decisions[-1].replicas == run.recs[-1].replicas
    assert len(json.dumps(run.state.to_dict())) < 4096


def test_restart_from_empty_status_is_a_fresh_state() -> None:
    assert ScalingState.from_dict(None) == ScalingState()
    assert ScalingState.from_dict({}) == ScalingState()


def test_bootstrap_from_history_forecasts_at_once() -> None:
    history = [(T0 + 15 * i, ramp(15 * i)) for i in range(120)]
    state = recommender.bootstrap(ScalingState(), samples=history, config=CONFIG)
    now = T0 + 15 * 120
    rec, _ = recommender.recommend(
        obs(now, rate=ramp(1800), replicas=8), config=CONFIG, state=state
    )
    assert rec.forecast_token_rate is not None
    assert rec.forecast_token_rate > ramp(1800) * 1.02  # the trend was learned


def test_same_inputs_same_outputs() -> None:
    a = simulate(busy_then_quiet, seconds=1800, start_replicas=10)
    b = simulate(busy_then_quiet, seconds=1800, start_replicas=10)
    assert a.recs == b.recs
    assert a.state == b.state


def morning_ramp_day(t: float) -> float:
    """300 tok/s at night, 3000 by day; the ramp is 08:00-08:20 UTC."""
    hour = (t % 86400) / 3600
    if hour < 8 or hour >= 20:
        return 300.0
    return 300.0 + 2700.0 * min((hour - 8) * 3, 1.0)


@pytest.mark.parametrize(
    ("seasonality", "ahead"),
    [pytest.param("Daily", True, id="daily"), pytest.param("None", False, id="none")],
)
def test_spec_seasonality_decides_whether_the_daily_profile_is_used(
    seasonality: str, ahead: bool
) -> None:
    config = replace(CONFIG, seasonality=seasonality, default_horizon_seconds=600.0)  # type: ignore[arg-type]
    base = 1_700_438_400.0  # a midnight UTC
    history = [(base + 60 * i, morning_ramp_day(60 * i)) for i in range(int(3 * 1440 + 7.9 * 60))]
    state = recommender.bootstrap(ScalingState(), samples=history, config=config)
    now = history[-1][0]  # 07:54, still 300 tok/s
    rec, _ = recommender.recommend(
        obs(now, rate=300.0, replicas=1, age=0.0), config=config, state=state
    )
    assert rec.forecast_token_rate is not None
    # The 30-minute profile bins smooth the 20-minute ramp, so "ahead" is a clear rise
    # over the night's 300 tok/s, not the full 705 tok/s of 08:04.
    assert (rec.forecast_token_rate > 1.2 * 300.0) is ahead


def test_decisions_record_changes_not_every_call() -> None:
    run = simulate(busy_then_quiet, seconds=2400, start_replicas=10)
    kept = run.state.decisions
    assert all(
        (a.replicas, a.reason) != (b.replicas, b.reason) for a, b in itertools.pairwise(kept)
    )
    assert kept[-1].replicas == run.recs[-1].replicas
    assert kept[-1].time <= T0 + run.times[-1]


def test_no_scale_down_right_after_the_operator_was_down_for_a_while() -> None:
    """A restart after an hour finds an old state: the window must be filled again."""
    state = warmed_up_state(6)
    later = T0 + 900 + 3600
    for i in range(19):  # 285 s of low load after the gap: still inside the new window
        rec, state = recommender.recommend(
            obs(later + 15 * i, rate=50.0, replicas=6), config=CONFIG, state=state
        )
        assert rec.replicas == 6
    rec, _ = recommender.recommend(
        obs(later + 15 * 21, rate=50.0, replicas=6), config=CONFIG, state=state
    )
    assert rec.replicas == 5


@pytest.mark.parametrize(
    "status",
    [
        pytest.param({"decisions": "nope", "lastScaleTime": "x"}, id="bad-fields"),
        pytest.param({"model": {"v": 1, "fc": {"p": ["a"] * 48}}}, id="bad-profile"),
        pytest.param(
            {"model": {"v": 1, "cap": {"s": 1000.0, "p": [1] * 16, "n": ["x"] * 16}}},
            id="bad-capacity",
        ),
        pytest.param({"model": {"v": 1, "down": [[1, 2, 3]]}}, id="bad-window"),
        pytest.param({"model": {"v": 99, "fc": 5}}, id="other-version"),
        pytest.param({"model": "garbage"}, id="model-not-a-dict"),
    ],
)
def test_a_nonsense_status_starts_afresh_instead_of_failing(status: dict[str, object]) -> None:
    state = ScalingState.from_dict(status)
    rec, after = recommender.recommend(obs(T0, rate=900.0, replicas=2), config=CONFIG, state=state)
    assert rec.replicas == 2
    json.dumps(after.to_dict())


def surge(*, with_queue: bool) -> list[Recommendation]:
    """Overload: the served rate is capped at 1600 tok/s while 1400 requests queue; new
    capacity drains the queue at 3000 tok/s for a minute; demand is then 2000 tok/s."""
    phases = (
        [(800.0, 0.0)] * 40
        + [(1600.0, q) for q in (100.0, 300.0, 500.0, 700.0, 900.0, 1100.0, 1300.0, 1400.0)]
        + [(3000.0, q) for q in (1100.0, 700.0, 300.0, 0.0)]
        + [(2000.0, 0.0)] * 10
    )
    state, replicas, out = ScalingState(), 2, []
    for i, (rate, queue) in enumerate(phases):
        rec, state = recommender.recommend(
            obs(
                T0 + 15 * i,
                rate=rate,
                replicas=replicas,
                warmed=min(replicas, 2 + i // 60),
                queue=queue if with_queue else None,
            ),
            config=CONFIG,
            state=state,
        )
        replicas = rec.replicas
        out.append(rec)
    return out


def test_a_draining_backlog_is_not_learned_as_demand() -> None:
    guarded = surge(with_queue=True)
    blind = surge(with_queue=False)
    assert max(r.replicas for r in guarded) < max(r.replicas for r in blind)
    assert max(r.replicas for r in guarded) >= needed(2000.0)
    assert any("queue draining" in r.message for r in guarded[48:52])
