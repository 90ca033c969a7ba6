"""The stabilisation windows as change-points: the same answers as a list of every pass,
no change when nothing changed (so no status write), and old stored windows kept."""

from __future__ import annotations

import json
from dataclasses import replace

from fixed_policy import FIXED_CAPACITY, T0, observation
from hypothesis import given, settings
from hypothesis import strategies as st

from modelscale.autoscaling import recommender
from modelscale.autoscaling import state as state_mod
from modelscale.autoscaling.types import PolicyConfig, ScalingState

Window = tuple[tuple[float, int], ...]

# (seconds since the previous pass, recommended replicas): passes 1-60 s apart.
PASSES = st.lists(st.tuples(st.integers(1, 60), st.integers(1, 6)), min_size=1, max_size=60)
KEEP = st.sampled_from([0.0, 15.0, 60.0, 240.0, 300.0])


def old_push(window: Window, *, now: float, replicas: int, keep: float, is_max: bool) -> Window:
    """The encoding before change-points (one entry per pass, its own time)."""
    out = [(t, r) for t, r in window if t > now - keep]
    while out and ((out[-1][1] <= replicas) if is_max else (out[-1][1] >= replicas)):
        out.pop()
    out.append((now, replicas))
    return tuple(out)


def held(passes: list[tuple[float, int]], *, now: float, keep: float, is_max: bool) -> int:
    """By brute force over every pass: each recommendation counts until the next pass."""
    last = len(passes) - 1
    counted = [r for i, (_, r) in enumerate(passes) if i == last or passes[i + 1][0] > now - keep]
    return max(counted) if is_max else min(counted)


def timeline(gaps: list[tuple[int, int]]) -> list[tuple[float, int]]:
    t, out = T0, []
    for gap, r in gaps:
        t += gap
        out.append((t, r))
    return out


@settings(max_examples=300, deadline=None)
@given(gaps=PASSES, keep=KEEP, is_max=st.booleans())
def test_change_points_give_the_max_and_min_of_the_per_pass_list(
    gaps: list[tuple[int, int]], keep: float, is_max: bool
) -> None:
    passes = timeline(gaps)
    new: Window = ()
    old: Window = ()
    longest_gap = max(g for g, _ in gaps)
    for i, (now, r) in enumerate(passes):
        new = state_mod.push(new, now=now, replicas=r, keep=keep, is_max=is_max)
        old = old_push(old, now=now, replicas=r, keep=keep, is_max=is_max)
        got = max(v for _, v in new) if is_max else min(v for _, v in new)
        assert got == held(passes[: i + 1], now=now, keep=keep, is_max=is_max)
        # Against the old list: the same answer, except that a value leaving the window
        # stays until the next pass replaced it (at most one pass longer): never less
        # conservative.
        was = max(v for _, v in old) if is_max else min(v for _, v in old)
        wider = [v for t, v in passes[: i + 1] if t > now - keep - longest_gap] or [r]
        bound = max(wider) if is_max else min(wider)
        assert (was <= got <= bound) if is_max else (bound <= got <= was)
        assert len(new) <= 6  # one entry per distinct value at most


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(st.integers(1, 6), min_size=1, max_size=80),
    keep=KEEP,
    interval=st.sampled_from([5.0, 15.0, 30.0]),
    is_max=st.booleans(),
)
def test_with_the_pass_interval_the_window_is_the_per_pass_one_exactly(
    values: list[int], keep: float, interval: float, is_max: bool
) -> None:
    # Passes `interval` apart (the operator's scaling interval, the simulator's 15 s):
    # told the interval, a value counts for exactly `keep` after the last pass that
    # recommended it, as the per-pass list (and the HPA's window) counts it.
    new: Window = ()
    old: Window = ()
    for i, r in enumerate(values):
        now = T0 + i * interval
        new = state_mod.push(new, now=now, replicas=r, keep=keep, is_max=is_max, lag=interval)
        old = old_push(old, now=now, replicas=r, keep=keep, is_max=is_max)
        got = max(v for _, v in new) if is_max else min(v for _, v in new)
        was = max(v for _, v in old) if is_max else min(v for _, v in old)
        assert got == was


@settings(max_examples=200, deadline=None)
@given(gaps=PASSES, keep=KEEP, is_max=st.booleans(), later=st.integers(1, 3600))
def test_the_same_recommendation_again_changes_nothing_until_a_value_leaves(
    gaps: list[tuple[int, int]], keep: float, is_max: bool, later: int
) -> None:
    passes = timeline(gaps)
    window: Window = ()
    for now, r in passes:
        window = state_mod.push(window, now=now, replicas=r, keep=keep, is_max=is_max)
    last_time, last = passes[-1]
    again = state_mod.push(window, now=last_time + later, replicas=last, keep=keep, is_max=is_max)
    # Entries only leave (a value that left the window); nothing moves with the clock.
    assert again == window[len(window) - len(again) :]
    twice = state_mod.push(again, now=last_time + later, replicas=last, keep=keep, is_max=is_max)
    assert twice == again


@settings(max_examples=200, deadline=None)
@given(gaps=PASSES, keep=KEEP, is_max=st.booleans(), later=st.integers(0, 600))
def test_a_window_stored_before_change_points_keeps_its_values(
    gaps: list[tuple[int, int]], keep: float, is_max: bool, later: int
) -> None:
    """An upgrade: the old per-pass queue, read as change-points, gives the same answer
    for as long as the old one would have kept its last pass."""
    passes = timeline(gaps)
    old: Window = ()
    for now, r in passes:
        old = old_push(old, now=now, replicas=r, keep=keep, is_max=is_max)
    converted = state_mod.from_pass_queue(old)
    now = passes[-1][0] + min(later, keep)
    last = passes[-1][1]
    kept_old = [v for t, v in old if t > now - keep] or [last]
    new = state_mod.push(converted, now=now, replicas=last, keep=keep, is_max=is_max)
    got = max(v for _, v in new) if is_max else min(v for _, v in new)
    assert got == (max(kept_old) if is_max else min(kept_old))


CONFIG = replace(FIXED_CAPACITY, scale_down_hysteresis=0.0, max_scale_down_step=1)


def test_a_steady_modeldeployment_writes_the_same_state_every_pass() -> None:
    """Metrics missing (the state's only mover is then the windows): the serialised state
    is the same from the second pass on, so the status patch is skipped."""
    state = ScalingState()
    dumps = []
    for i in range(40):
        _, state = recommender.recommend(
            observation(T0 + 15 * i, rate=None, replicas=3), config=CONFIG, state=state
        )
        dumps.append(json.dumps(state.to_dict(), sort_keys=True))
    assert len(set(dumps[1:])) == 1


def test_an_upgraded_state_still_holds_the_scale_down() -> None:
    """A state written by the previous encoding (per-pass windows, key "down") while 5
    replicas were recommended 100 s ago: after the upgrade the operator still waits out
    the window before going below 5."""
    stored = {
        "model": {
            "v": state_mod.MODEL_VERSION,
            "down": [[T0 - 100, 5], [T0 - 15, 1]],
            "up": [[T0 - 15, 1]],
            "since": T0 - 3600,
        }
    }
    state = ScalingState.from_dict(json.loads(json.dumps(stored)))
    replicas = 5
    times = []
    for i in range(30):
        now = T0 + 15 * i
        rec, state = recommender.recommend(
            observation(now, rate=50.0, replicas=replicas), config=CONFIG, state=state
        )
        if rec.replicas < replicas:
            times.append(now)
        replicas = rec.replicas
    assert times, "never scaled down"
    # The 5 recommended at T0 - 100 leaves the 300 s window at T0 + 200, not earlier.
    assert times[0] >= T0 - 100 + CONFIG.scale_down_stabilization_seconds
    assert times[0] <= T0 - 100 + CONFIG.scale_down_stabilization_seconds + 15


SAMPLES = st.lists(
    st.tuples(st.integers(1, 60), st.floats(0.0, 1e5, allow_nan=False)), min_size=1, max_size=80
)


@settings(max_examples=200, deadline=None)
@given(SAMPLES, st.sampled_from([0.0, 60.0, 600.0, 900.0]))
def test_the_peak_window_is_the_max_of_the_samples_it_keeps_and_survives_the_status(
    samples: list[tuple[int, float]], keep: float
) -> None:
    """`push_peak` (the hold after a sharp fall, PolicyConfig.scale_down_peak_window_seconds):
    its first entry is the largest sample of the last `keep` seconds, by brute force; and
    the window read back from the status JSON is the same, so a restart keeps the hold."""
    window: tuple[tuple[float, float], ...] = ()
    now = T0
    seen: list[tuple[float, float]] = []
    for gap, value in samples:
        now += gap
        seen.append((now, value))
        window = state_mod.push_peak(window, now=now, value=value, keep=keep)
        inside = [v for t, v in seen if t > now - keep]
        assert (window[0][1] if window else None) == (max(inside) if inside else None)
    config = PolicyConfig(scale_down_peak_window_seconds=keep)
    model = state_mod.load({}, config=config)._replace(peak=window)
    data = json.loads(json.dumps(state_mod.dump(model, config=config)))
    assert state_mod.load(data, config=config).peak == window
    # A status written before the hold existed has no window: it starts empty.
    data.pop("pk")
    assert state_mod.load(data, config=config).peak == ()
