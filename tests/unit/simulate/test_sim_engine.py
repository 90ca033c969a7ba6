"""The replica model and the replay engine, on small synthetic loads."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from sim_trace import make_trace

from modelscale.simulate import engine, figures, suite, trace
from modelscale.simulate.engine import View
from modelscale.simulate.replica import ReplicaParams, Slo
from modelscale.simulate.trace import Trace


def poisson(
    rate: float, duration: float, *, inp: int = 200, out: int = 100, seed: int = 0
) -> Trace:
    rng = np.random.default_rng(seed)
    n = int(rng.poisson(rate * duration))
    return make_trace(
        "synthetic", np.sort(rng.uniform(0, duration, n)), inp=inp, out=out, duration_s=duration
    )


class Fixed:
    """Holds `replicas`, optionally stepping to `then` at `at` seconds."""

    interval_s = 1.0

    def __init__(
        self, replicas: int, *, then: int | None = None, at: float = 0.0, gate: bool = True
    ) -> None:
        self.name = "fixed"
        self.replicas, self.then, self.at = replicas, then, at
        self.warmup_gate = gate

    def decide(self, view: View) -> int:
        if self.then is not None and view.now >= self.at:
            return self.then
        return self.replicas


def median_tpot(rate: float) -> float:
    tr = poisson(rate, 300.0)
    result = engine.run(tr, Fixed(1), params=ReplicaParams(), initial_replicas=1)
    return float(np.median(result.tpot))


def test_inter_token_latency_rises_with_batch() -> None:
    tpots = [median_tpot(rate) for rate in (0.2, 2.0, 6.0)]
    # Single stream ~ alpha = 1/75 s; more concurrent sequences -> slower tokens.
    assert tpots[0] == pytest.approx(1 / 75, rel=0.15)
    assert tpots[0] < tpots[1] < tpots[2]


def test_overload_queues_requests_and_ttft_grows() -> None:
    params = ReplicaParams(max_batch=4)
    light = engine.run(poisson(0.2, 300), Fixed(1), params=params, initial_replicas=1)
    heavy = engine.run(poisson(5.0, 300), Fixed(1), params=params, initial_replicas=1)
    prefill = 200 / params.prefill_tokens_per_s
    assert np.median(light.ttft) == pytest.approx(prefill, abs=0.01)
    assert np.median(heavy.ttft) > 10 * prefill  # waited for a free sequence slot
    assert np.all(np.isfinite(heavy.ttft))  # the drain after the trace serves everyone


@pytest.mark.parametrize(
    ("gate", "first_traffic"),
    [
        pytest.param(True, 60 + 120 + 20, id="gated-serves-after-L+W"),
        pytest.param(False, 60 + 120, id="ungated-serves-after-L"),
    ],
)
def test_new_replica_serves_only_after_startup(gate: bool, first_traffic: float) -> None:
    # One replica saturated (batch 1); a second is created at the first decision (t=60).
    params = ReplicaParams(max_batch=1, startup_sigma=0.0)
    tr = poisson(3.0, 400, out=20)
    policy = Fixed(1, then=2, at=60.0, gate=gate)
    result = engine.run(tr, policy, params=params, initial_replicas=1)
    t_admit = tr.arrival_s + result.ttft - params.prefill_s(tr.input_tokens)
    # Throughput of one replica caps admissions; with two, more requests start per second.
    before = (t_admit < first_traffic - 1).sum() / (first_traffic - 1)
    after = ((t_admit >= first_traffic + 1) & (t_admit < 400)).sum() / (400 - first_traffic - 1)
    assert after > 1.5 * before
    assert bool(result.cold.any()) is (not gate)
    if not gate:
        cold_admits = t_admit[result.cold]
        assert cold_admits.min() >= 60 + 120 - 0.5
        assert cold_admits.max() <= 60 + 140 + 0.5


def test_replica_seconds_count_starting_replicas() -> None:
    tr = poisson(0.1, 600)
    result = engine.run(tr, Fixed(1, then=3, at=100.0), params=ReplicaParams(), initial_replicas=1)
    assert result.replica_seconds == pytest.approx(100 + 3 * 500, abs=2)
    assert result.scale_events == 1


def test_same_seed_same_figures() -> None:
    tr = poisson(4.0, 900, seed=3)

    def figs() -> dict[str, object]:
        setup = suite.prepare(tr)
        return {n: f.to_dict() for n, (_, f) in suite.run_all(setup, ["hpa", "oracle"]).items()}

    assert figs() == figs()


def test_request_and_window_attainment() -> None:
    tr = Trace("t", np.array([0.0, 10.0, 70.0]), np.array([1, 1, 1]), np.array([2, 2, 2]), 120.0)
    result = engine.RunResult(
        policy="x",
        ttft=np.array([0.1, 5.0, 0.1]),
        tpot=np.array([0.01, 0.01, 0.01]),
        cold=np.zeros(3, dtype=bool),
        replica_seconds=240.0,
        scale_events=0,
    )
    f = figures.compute(tr, result, Slo(), oracle_replica_seconds=120.0)
    assert f.slo_attainment_requests == pytest.approx(2 / 3)
    # Windows of fewer than figures.MIN_REQUESTS requests are not scored (never "met"):
    # see tests/unit/simulate/test_sim_bound.py for scored windows.
    assert (f.windows_scored, f.windows_unscored, f.slo_attainment_windows) == (0, 2, 0.0)
    assert f.excess_over_oracle == pytest.approx(1.0)


class Spy:
    """Holds `replicas` and records what the View shows at each decision."""

    warmup_gate = True

    def __init__(self, replicas: int, *, interval_s: float = 15.0) -> None:
        self.name = "spy"
        self.replicas, self.interval_s = replicas, interval_s
        self.seen: list[dict[str, object]] = []

    def decide(self, view: View) -> int:
        self.seen.append(
            {
                "now": view.now,
                "sample_time": view.sample_time,
                "running": view.running_requests(),
                "waiting": view.waiting_requests(),
                "kv": view.kv_cache_usage(),
                "horizon": view.observed_horizon(),
            }
        )
        return self.replicas


def alternating(rate: float, duration: float) -> Trace:
    """Every other request is long (1,000 output tokens), the rest short (10)."""
    n = int(rate * duration)
    out = np.where(np.arange(n) % 2 == 0, 1000, 10).astype(np.int64)
    return make_trace("alt", np.arange(n) / rate, inp=100, out=out, duration_s=duration)


def test_least_loaded_balances_what_round_robin_piles_up() -> None:
    # Two pods, alternating long and short requests: round-robin sends every long request
    # to the same pod; least-loaded (fewest in flight) spreads them.
    tr = alternating(4.0, 300.0)
    imbalance, p99_tpot = {}, {}
    for routing in engine.ROUTING:
        spy = Spy(2)
        result = engine.run(tr, spy, params=ReplicaParams(), initial_replicas=2, routing=routing)
        per_pod = [s["running"].per_pod for s in spy.seen if s["now"] >= 120]  # type: ignore[union-attr]
        imbalance[routing] = float(np.mean([max(p) - min(p) for p in per_pod]))
        p99_tpot[routing] = figures.p99(result.tpot)
    assert imbalance["round-robin"] > 20
    assert imbalance["least-loaded"] < 5
    assert p99_tpot["round-robin"] > p99_tpot["least-loaded"]
    with pytest.raises(ValueError, match="routing must be one of"):
        engine.run(tr, Spy(2), params=ReplicaParams(), initial_replicas=2, routing="random")


@pytest.mark.parametrize("scrape_s", [15.0, 30.0])
def test_metrics_lag_by_up_to_one_scrape_interval(scrape_s: float) -> None:
    tr = poisson(2.0, 400)
    spy = Spy(1, interval_s=10.0)
    engine.run(tr, spy, params=ReplicaParams(), initial_replicas=1, scrape_s=scrape_s)
    lags = [float(s["now"]) - float(s["sample_time"]) for s in spy.seen]  # type: ignore[arg-type]
    assert min(lags) >= 0 and max(lags) < scrape_s
    assert max(lags) > 0.5 * scrape_s  # a decision between scrapes sees the older one
    # Scrapes fall on their own grid, half an interval out of phase with t = 0.
    assert {round(float(s["sample_time"]) % scrape_s, 6) for s in spy.seen} == {scrape_s / 2}  # type: ignore[arg-type]


def test_a_load_step_shows_only_after_the_next_scrape() -> None:
    # Nothing, then 3 req/s from t = 100: the first scrape after 100 s is at 112.5.
    rng = np.random.default_rng(0)
    n = 900
    tr = make_trace(
        "step", np.sort(rng.uniform(100.0, 400.0, n)), inp=200, out=100, duration_s=400.0
    )
    spy = Spy(1, interval_s=1.0)
    engine.run(tr, spy, params=ReplicaParams(), initial_replicas=1)
    seen = {float(s["now"]): s for s in spy.seen}  # type: ignore[arg-type]
    assert seen[112.0]["running"].total == 0  # type: ignore[union-attr]
    assert seen[113.0]["running"].total > 0  # type: ignore[union-attr]
    assert 0 < seen[200.0]["kv"].mean < 0.1  # type: ignore[union-attr]
    assert seen[200.0]["waiting"].total == 0  # type: ignore[union-attr]


def test_observed_horizon_is_what_new_replicas_took() -> None:
    tr = poisson(0.5, 600)
    spy = Spy(3)
    result = engine.run(tr, spy, params=ReplicaParams(), initial_replicas=1, seed=4)
    horizons = [s["horizon"] for s in spy.seen]
    assert horizons[0] is None  # no replica created during the replay is warm yet
    last = horizons[-1]
    assert last == pytest.approx(float(np.median(result.startup_s)) + 20.0)


def aggregate_csv(tmp_path: Path, rps: list[float], *, starts: list[int] | None = None) -> Path:
    starts = starts if starts is not None else [600 * k for k in range(len(rps))]
    rows = [
        "window_start_s,total_rps,active_clients,covered_rps,mean_input_tokens,mean_output_tokens"
    ]
    rows += [
        f"{s},{r},1,{r},{200 if r else ''},{20 if r else ''}"
        for s, r in zip(starts, rps, strict=True)
    ]
    path = tmp_path / "agg.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


def test_data_gaps_are_reported_and_not_scored_as_met(tmp_path: Path) -> None:
    # Window 2 is empty and window 4 is missing from the series (starts jump 1800 -> 3000).
    path = aggregate_csv(tmp_path, [2.0, 2.0, 0.0, 2.0, 2.0], starts=[0, 600, 1200, 1800, 3000])
    src = trace.stream(path)
    assert [(g.start_s, g.end_s) for g in src.gaps] == [(1200.0, 1800.0), (2400.0, 3000.0)]
    result = engine.run(src, Fixed(2), params=ReplicaParams(), initial_replicas=2, dt=1.0)
    w = result.windows
    assert w is not None and w.requests.size == 60
    gap_minutes = np.flatnonzero(w.gap)
    assert set(range(20, 30)) | set(range(40, 50)) == set(gap_minutes.tolist())
    assert not w.met[w.gap].any()
    assert w.met[~w.gap].all()  # the served windows meet the SLO


def test_stream_and_in_memory_replay_agree(tmp_path: Path) -> None:
    path = aggregate_csv(tmp_path, [3.0, 5.0])
    streamed = engine.run(
        trace.stream(path, seed=3), Fixed(2), params=ReplicaParams(), initial_replicas=2
    )
    loaded = engine.run(
        trace.load(path, seed=3), Fixed(2), params=ReplicaParams(), initial_replicas=2
    )
    assert streamed.ttft.size == 0 and loaded.ttft.size == loaded.requests
    assert streamed.requests == loaded.requests
    assert streamed.replica_seconds == loaded.replica_seconds
    assert streamed.windows is not None and loaded.windows is not None
    assert np.array_equal(streamed.windows.p99_ttft, loaded.windows.p99_ttft)
    assert np.array_equal(streamed.windows.ok_requests, loaded.windows.ok_requests)
    # The windows' P99s are those of the per-request arrays.
    first = loaded.ttft[: loaded.windows.requests[0]]
    assert loaded.windows.p99_ttft[0] == figures.p99(first)


def peak_bytes(path: Path) -> tuple[int, int]:
    tracemalloc.start()
    result = engine.run(
        trace.stream(path),
        Fixed(2),
        params=ReplicaParams(),
        initial_replicas=2,
        dt=5.0,
        drain_s=60.0,
    )
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak, result.requests


def test_streamed_replay_memory_does_not_grow_with_trace_length(tmp_path: Path) -> None:
    short_dir, long_dir = tmp_path / "short", tmp_path / "long"
    short_dir.mkdir()
    long_dir.mkdir()
    short_peak, short_n = peak_bytes(aggregate_csv(short_dir, [10.0] * 2))  # 20 min
    long_peak, long_n = peak_bytes(aggregate_csv(long_dir, [10.0] * 12))  # 2 h
    assert long_n > 5 * short_n
    # 6x the requests; memory bounded by a chunk and the in-flight requests, not the trace
    # (per-window arrays grow by 8 B x windows, negligible).
    assert long_peak < 1.5 * short_peak
    assert long_peak < 8 * 8 * long_n  # far below one 8-byte array per request field


def test_a_pool_keeps_every_field_through_take_cat_insert_and_delete() -> None:
    """A pool's fields are rows of two arrays (speed); every field still travels with its
    request."""
    from modelscale.simulate.pool import Pool  # noqa: PLC0415

    n = 4
    ids = np.arange(n, dtype=np.int64)
    p = Pool.arrivals(
        ids=ids,
        arr=ids * 0.5,
        inp=ids + 10,
        out=ids + 20,
        cached=ids,
        win=ids + 1,
        prio=ids + 2,
        target=ids * 0.25,
    )
    p.pod = ids + 3
    names = ("id", "arr", "inp", "out", "cached", "win", "pod", "prio", "reserve", "target")
    back = p.take(np.array([3, 1])).cat(p.take(np.array([0])))
    for name in names:
        assert np.array_equal(getattr(back, name), getattr(p, name)[[3, 1, 0]]), name
    assert np.array_equal(p.reserve, (ids + 10 + ids + 20).astype(np.float64))
    inserted = p.delete(np.array([1, 2])).insert(np.array([1]), p.take(np.array([1, 2])))
    for name in names:
        assert np.array_equal(getattr(inserted, name), getattr(p, name)), name
