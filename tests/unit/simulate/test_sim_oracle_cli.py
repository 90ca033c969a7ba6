"""The oracle, cold requests per policy, and the `modelscale simulate` command."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from modelscale.simulate import cli, figures, oracle, suite
from modelscale.simulate.replica import ReplicaParams, Slo
from modelscale.simulate.trace import Trace


def ramp(seed: int = 0) -> Trace:
    """Quiet for 5 min, then 3x the load for 10 min, then quiet again for 5 min."""
    rng = np.random.default_rng(seed)
    parts = []
    for start, end, rate in ((0, 300, 2.0), (300, 900, 6.0), (900, 1200, 2.0)):
        parts.append(np.sort(rng.uniform(start, end, int(rng.poisson(rate * (end - start))))))
    arrivals = np.concatenate(parts)
    n = arrivals.size
    return Trace(
        name="ramp",
        arrival_s=arrivals,
        input_tokens=rng.integers(100, 1500, n),
        output_tokens=rng.integers(20, 300, n),
        duration_s=1200.0,
    )


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


def test_oracle_meets_its_own_slo_in_the_model() -> None:
    tr = ramp()
    run = oracle.solve(tr, params=ReplicaParams(), slo=Slo())
    assert run.meets_slo
    assert figures.window_ok(tr, run.result, Slo()).all()
    assert int(run.result.cold.sum()) == 0


@pytest.fixture(scope="module")
def ramp_runs() -> dict[str, figures.Figures]:
    setup = suite.prepare(ramp())
    return {name: f for name, (_, f) in suite.run_all(setup).items()}


@pytest.mark.parametrize(
    ("policy", "cold"),
    [
        pytest.param("modelscale", False, id="ours-gated"),
        pytest.param("oracle", False, id="oracle-gated"),
        pytest.param("static-peak", False, id="static"),
        pytest.param("hpa", True, id="hpa-ungated"),
        pytest.param("aibrix-apa", True, id="apa-ungated"),
    ],
)
def test_cold_requests_only_for_peers_without_a_warm_up_gate(
    ramp_runs: dict[str, figures.Figures], policy: str, cold: bool
) -> None:
    assert (ramp_runs[policy].cold_requests > 0) is cold


def test_static_peak_costs_at_least_the_oracle(ramp_runs: dict[str, figures.Figures]) -> None:
    assert ramp_runs["static-peak"].replica_seconds >= ramp_runs["oracle"].replica_seconds
    assert ramp_runs["oracle"].excess_over_oracle == 0.0


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
    }
    for figs in doc["policies"].values():
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
    argv = [a.replace("{bad}", str(bad)).replace("{ok}", str(trace_file)) for a in args]
    with pytest.raises(SystemExit) as exc:
        code = cli.main(argv)
        raise SystemExit(code)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert message in err
    assert len(err.splitlines()) == 1
