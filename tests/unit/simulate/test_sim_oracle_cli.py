"""The oracle, cold requests per policy, and the `modelscale simulate` command."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from sim_trace import make_trace

from modelscale.simulate import cli, figures, oracle, suite
from modelscale.simulate.replica import ReplicaParams, Slo
from modelscale.simulate.trace import Trace


def drawn(
    name: str,
    arrivals: np.ndarray,
    rng: np.random.Generator,
    *,
    prompt: tuple[int, int],
    output: tuple[int, int],
    duration_s: float,
) -> Trace:
    """A trace at these arrivals, prompt then output lengths drawn uniformly in [lo, hi)."""
    n = arrivals.size
    inp, out = rng.integers(*prompt, n), rng.integers(*output, n)
    return make_trace(name, arrivals, inp=inp, out=out, duration_s=duration_s)


def ramp(seed: int = 0) -> Trace:
    """Quiet for 5 min, then 3x the load for 10 min, then quiet again for 5 min."""
    rng = np.random.default_rng(seed)
    parts = []
    for start, end, rate in ((0, 300, 2.0), (300, 900, 6.0), (900, 1200, 2.0)):
        parts.append(np.sort(rng.uniform(start, end, int(rng.poisson(rate * (end - start))))))
    arrivals = np.concatenate(parts)
    return drawn("ramp", arrivals, rng, prompt=(100, 1500), output=(20, 300), duration_s=1200.0)


@pytest.mark.parametrize(
    ("need", "expected"),
    [
        pytest.param([1, 1, 2, 2, 1], [(-140, 300), (120 - 140, 240)], id="starts-L+W-early"),
        # The dip at minute 2 is shorter than L+W = 140 s: replica 2 is kept through it.
        pytest.param([2, 2, 1, 2, 2], [(-140, 300), (-140, 300)], id="kept-through-short-dip"),
        # A dip of 3 minutes is longer than L+W: stopped and started again.
        pytest.param(
            [2, 1, 1, 1, 2], [(-140, 300), (-140, 60), (240 - 140, 300)], id="long-dip-restarts"
        ),
    ],
)
def test_oracle_schedule(need: list[int], expected: list[tuple[float, float]]) -> None:
    lives = oracle.schedule(np.array(need), horizon_s=140.0)
    assert sorted(lives) == sorted(expected)


def test_default_slo_is_length_aware() -> None:
    assert suite.DEFAULT_SLO.ttft_target(0) == 2.0
    assert suite.DEFAULT_SLO.ttft_target(10_000) == 7.0
    assert cli.build_parser().parse_args(["--trace", "x"]).slo_ttft_per_1k == 0.5


def test_oracle_meets_the_policies_target_in_the_model() -> None:
    tr = ramp()
    run = oracle.solve(tr, params=ReplicaParams(), slo=Slo())
    assert run.meets_slo
    scores = figures.window_scores(tr, run.result, Slo())
    assert scores.attainment >= figures.TARGET_WINDOWS
    assert int(run.result.cold.sum()) == 0


def test_oracle_is_never_costlier_than_a_constant_fleet_that_meets_the_target() -> None:
    tr = ramp()
    params, slo = ReplicaParams(), Slo()
    run = oracle.solve(tr, params=params, slo=slo)
    peak = int(run.need.max())
    # A schedule that overshoots (every interval at twice the peak) gives way to a
    # constant fleet of the peak, which meets the target at lower cost.
    wasteful = dataclasses.replace(
        run,
        need=np.full(run.need.size, 2 * peak, dtype=np.int64),
        result=dataclasses.replace(run.result, replica_seconds=1e12),
    )
    fixed = oracle.no_costlier_than_constant(wasteful, tr, replicas=peak, params=params, slo=slo)
    assert fixed.meets_slo and fixed.need.tolist() == [peak] * run.need.size
    assert fixed.result.replica_seconds < 1e12
    # A constant fleet too small for the ramp does not replace a schedule that meets it;
    # nor does one that costs more.
    assert oracle.no_costlier_than_constant(run, tr, replicas=1, params=params, slo=slo) is run
    assert (
        oracle.no_costlier_than_constant(run, tr, replicas=4 * peak, params=params, slo=slo) is run
    )


def bursts() -> Trace:
    """Each minute's 240 requests arrive in its first 5 s: the per-minute fluid rate
    (4 req/s) badly underestimates what the burst needs."""
    rng = np.random.default_rng(1)
    arrivals = np.sort(np.concatenate([m * 60 + rng.uniform(0, 5, 240) for m in range(10)]))
    return drawn("bursts", arrivals, rng, prompt=(500, 1500), output=(20, 200), duration_s=600.0)


def test_oracle_reports_a_missed_target_when_its_round_cap_is_hit() -> None:
    # One round is the fluid schedule alone, which the bursts break; more rounds repair it.
    tr = bursts()
    capped = oracle.solve(tr, params=ReplicaParams(), slo=Slo(), max_rounds=1)
    assert not capped.meets_slo
    scores = figures.window_scores(tr, capped.result, Slo())
    assert scores.attainment == capped.attainment < figures.TARGET_WINDOWS
    repaired = oracle.solve(tr, params=ReplicaParams(), slo=Slo(), max_rounds=30)
    assert repaired.meets_slo


Tables = dict[str, dict[str, figures.Figures]]


@pytest.fixture(scope="module")
def ramp_setup() -> suite.Setup:
    return suite.prepare(ramp())


@pytest.fixture(scope="module")
def ramp_tables(ramp_setup: suite.Setup) -> Tables:
    setup = ramp_setup
    return {
        t: {name: f for name, (_, f) in runs.items()} for t, runs in suite.run_tables(setup).items()
    }


@pytest.mark.parametrize(
    ("table", "policy", "cold"),
    [
        pytest.param("gated", "modelscale", False, id="ours-gated"),
        pytest.param("gated", "oracle", False, id="oracle-gated"),
        pytest.param("gated", "static-peak", False, id="static"),
        pytest.param("gated", "hpa", False, id="hpa-gated"),
        pytest.param("gated", "aibrix-apa", False, id="apa-gated"),
        pytest.param("as_deployed", "hpa", True, id="hpa-as-deployed"),
        pytest.param("as_deployed", "aibrix-apa", True, id="apa-as-deployed"),
        pytest.param("as_deployed", "modelscale", False, id="ours-as-deployed"),
    ],
)
def test_cold_requests_only_for_peers_run_without_the_gate(
    ramp_tables: Tables, table: str, policy: str, cold: bool
) -> None:
    assert (ramp_tables[table][policy].cold_requests > 0) is cold


def test_both_tables_hold_every_policy(ramp_tables: Tables) -> None:
    assert list(ramp_tables["gated"]) == list(suite.default_policies()[0])
    assert list(ramp_tables["as_deployed"]) == list(suite.default_policies()[0])


def test_static_peak_costs_at_least_the_oracle(ramp_tables: Tables) -> None:
    figs = ramp_tables["gated"]
    assert figs["static-peak"].replica_seconds >= figs["oracle"].replica_seconds
    assert figs["oracle"].excess_over_oracle == 0.0
    assert figs["static-peak"].slo_attainment_windows >= figures.TARGET_WINDOWS


def test_every_policy_starts_from_the_first_minutes_load_not_the_oracles(
    ramp_setup: suite.Setup,
) -> None:
    # The ramp's first minute needs one replica by the fluid rate; its peak needs more.
    setup = ramp_setup
    assert setup.initial_replicas == 1
    assert int(setup.oracle_run.need.max()) > 1
    policy = suite.make_policy("hpa", setup)
    result = suite.run_policy(setup, policy)
    assert result.replicas[0] == 1


def test_the_start_is_sized_from_the_first_minutes_load_at_the_load_tested_target() -> None:
    # 1,000 output tok/s in the first minute, 2,000 after; 400 tok/s per replica at 0.8.
    arrivals = np.concatenate([np.linspace(0, 59.9, 600), np.linspace(60, 119.9, 1200)])
    tr = make_trace("two", arrivals, inp=100, out=100, duration_s=120.0)
    sizing = suite.Sizing(
        tokens_per_s=500.0, concurrency=8.0, running_per_replica=8.0, kv_usage=0.5
    )
    assert suite.first_minute_replicas(tr, sizing) == 3  # ceil(1000 / 400), not 5


@pytest.fixture
def trace_file(tmp_path: Path) -> Path:
    tr = ramp()
    path = tmp_path / "ramp.csv"
    rows = ["t_s,input_tokens,output_tokens"] + [
        f"{t:.3f},{i},{o}"
        for t, i, o in zip(tr.arrival_s, tr.input_tokens, tr.output_tokens, strict=True)
    ]
    path.write_text("\n".join(rows) + "\n")
    return path


def test_json_output_shape(trace_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["--trace", str(trace_file), "--policy", "hpa", "--policy", "oracle", "--json"])
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["trace"] == "ramp.csv"
    assert list(doc["policies"]) == ["hpa", "oracle"]
    keys = {
        "slo_attainment_requests",
        "slo_attainment_windows",
        "replica_seconds",
        "excess_over_oracle",
        "scale_events",
        "cold_requests",
        "windows_scored",
        "windows_unscored",
    }
    assert doc["slo_feasible"] is True
    assert doc["oracle_meets_slo"] is True
    assert 0 < doc["lower_bound_replica_seconds"] <= doc["policies"]["oracle"]["replica_seconds"]
    assert list(doc["policies_gated"]) == ["hpa", "oracle"]
    assert "best_at_target" not in doc
    for figs in [*doc["policies"].values(), *doc["policies_gated"].values()]:
        assert set(figs) == keys
        assert isinstance(figs["scale_events"], int) and isinstance(figs["cold_requests"], int)
        assert 0.0 <= figs["slo_attainment_windows"] <= 1.0


def test_plot_writes_a_png(trace_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "run.png"
    assert cli.main(["--trace", str(trace_file), "--policy", "hpa", "--plot", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--trace", "/nonexistent.csv"], "trace file not found", id="missing-file"),
        pytest.param(["--trace", "{bad}"], "expected per-request columns", id="bad-columns"),
        pytest.param(["--trace", "{ok}", "--policy", "vpa"], "invalid choice", id="bad-policy"),
        pytest.param(["--trace", "{ok}", "--slo-ttft", "0"], "--slo-ttft", id="bad-slo"),
        pytest.param(
            ["--trace", "{ok}", "--slo-ttft-per-1k", "-1"], "--slo-ttft-per-1k", id="bad-per-1k"
        ),
        pytest.param(["--trace", "{ok}", "--seeds", "0"], "--seeds", id="bad-seeds"),
        pytest.param(
            ["--trace", "{outlier}", "--slo-ttft-per-1k", "0"],
            "one replica cannot serve the mean request",
            id="no-capacity",
        ),
        pytest.param([], "--trace", id="no-trace"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    args: list[str],
    message: str,
    tmp_path: Path,
    trace_file: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("time,tokens\n1,2\n")
    # Short prompts but one 3M-token outlier a minute: each window is attainable (the
    # outlier is within its 1 % allowance), the mean prompt (> 16k) is not servable.
    outlier = tmp_path / "outlier.csv"
    rows = [f"{t * 0.5:.1f},{3_000_000 if t % 120 == 0 else 100},50" for t in range(1200)]
    outlier.write_text("t_s,input_tokens,output_tokens\n" + "\n".join(rows) + "\n")
    argv = [
        a.replace("{bad}", str(bad))
        .replace("{ok}", str(trace_file))
        .replace("{outlier}", str(outlier))
        for a in args
    ]
    with pytest.raises(SystemExit) as exc:
        code = cli.main(argv)
        raise SystemExit(code)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert message in err
    assert len(err.splitlines()) == 1


def _long_prompts(tmp_path: Path, *, prompt: int) -> Path:
    rng = np.random.default_rng(3)
    t = np.sort(rng.uniform(0, 600, 1200))
    path = tmp_path / "long.csv"
    rows = [f"{x:.3f},{prompt},{int(rng.integers(20, 200))}" for x in t]
    path.write_text("t_s,input_tokens,output_tokens\n" + "\n".join(rows) + "\n")
    return path


def test_unattainable_slo_is_reported_and_not_scored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 20k-token prompts prefill in 2.5 s at an idle replica: a flat 2 s TTFT is out of reach.
    path = _long_prompts(tmp_path, prompt=20_000)
    flat = ["--slo-ttft-per-1k", "0"]
    assert cli.main(["--trace", str(path), "--json", *flat]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["slo_feasible"] is False
    assert doc["policies"] == {} and doc["lower_bound_replica_seconds"] is None
    assert doc["oracle_meets_slo"] is False
    assert "TTFT target" in doc["reason"]
    assert cli.main(["--trace", str(path), *flat]) == 0
    assert "SLO NOT attainable, nothing scored" in capsys.readouterr().out


def test_length_aware_ttft_makes_long_prompts_attainable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 14k-token prompts prefill in 1.75 s: under a 1 s TTFT they never meet it; with an
    # allowance of 0.5 s per 1k prompt tokens (target 8 s) they can.
    path = _long_prompts(tmp_path, prompt=14_000)
    argv = ["--trace", str(path), "--policy", "static-peak", "--json", "--slo-ttft", "1"]
    assert cli.main([*argv, "--slo-ttft-per-1k", "0"]) == 0
    assert json.loads(capsys.readouterr().out)["slo_feasible"] is False
    assert cli.main([*argv, "--slo-ttft-per-1k", "0.5"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["slo_feasible"] is True
    assert doc["slo"]["ttft_per_1k_input_s"] == 0.5
    assert doc["policies"]["static-peak"]["slo_attainment_windows"] >= 0.99


def test_seeds_report_a_confidence_interval(
    trace_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--trace", str(trace_file), "--policy", "hpa", "--rate-scale", "1.5", "--json"]
    argv += ["--duration", "600"]
    assert cli.main([*argv, "--seeds", "3"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["seeds"] == 3
    low, high = doc["ci95"]["gated"]["hpa"]["replica_seconds"]
    mean = doc["policies_gated"]["hpa"]["replica_seconds"]
    # Copies shifted differently per seed: the runs differ, so the interval has width.
    assert low < mean < high


def test_sweep_reports_best_at_target_for_both_tables(
    trace_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--trace", str(trace_file), "--policy", "hpa", "--policy", "static-peak"]
    argv += ["--duration", "600"]
    assert cli.main([*argv, "--sweep", "--json"]) == 0
    best = json.loads(capsys.readouterr().out)["best_at_target"]
    assert set(best) == {"gated", "as_deployed"}
    for table in best.values():
        assert set(table) == {"hpa", "static-peak", "oracle"}
        for entry in table.values():
            assert set(entry) == {"replica_seconds", "slo_attainment_windows", "setting"}
            rs = entry["replica_seconds"]
            assert rs is None or entry["slo_attainment_windows"] >= 0.99
    assert best["gated"]["static-peak"]["setting"].startswith("replicas ")
    assert best["gated"]["hpa"]["setting"].startswith("target x")


def test_start_and_duration_slice_every_trace_kind(
    trace_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    aggregate = Path(__file__).resolve().parents[3] / "bench/traces"
    for path, extra in (
        (trace_file, []),
        (aggregate / "servegen_language_m-large_10min.csv.gz", ["--rate-scale", "0.02"]),
    ):
        argv = ["--trace", str(path), "--start", "300", "--duration", "600", "--json"]
        assert cli.main([*argv, "--policy", "static-peak", "--dt", "1", *extra]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["windows"]["scored"] + doc["policies"]["static-peak"]["windows_unscored"] == 10
