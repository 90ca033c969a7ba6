"""The simulator's speed-ups change no result: replays of short slices of two traces
through two policies (and a serving policy that sheds) match, bit for bit, what main
printed before them (issue 11: `make bench-sweep` took over an hour).

The golden file holds, per replay, SHA-256 digests of every per-request and per-window
array of `RunResult` and the exact repr of its scalars, plus the exact `--json` output of
one `modelscale simulate` run. It was made from the code before the speed-ups (main at
f263fa0 with this round's two policy changes merged: the change-point stabilisation windows
and the scale-down reach, i.e. the speed-ups' parent tree) with
`PYTHONPATH=<that checkout>/operator python tests/unit/simulate/test_sim_equal_results.py`.
A change MEANT to alter results (a replica-model change) regenerates it that way, from its
own code, and says so in its commit."""

from __future__ import annotations

import hashlib
import io
import json
import pathlib
import sys
from contextlib import redirect_stdout
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from modelscale.simulate import baselines, cli, engine, ours, peers, suite, trace, traffic
from modelscale.simulate.replica import ReplicaParams
from modelscale.simulate.serving import PriorityClass, ServingPolicy

ROOT = pathlib.Path(__file__).resolve().parents[3]
TRACES = ROOT / "bench" / "traces"
GOLDEN = pathlib.Path(__file__).parent / "data" / "golden_equal_results.json"
SIZING = peers.Sizing(tokens_per_s=650.0, concurrency=20.0, running_per_replica=18.0, kv_usage=0.3)
CLI_ARGS = ["--duration", "600", "--policy", "hpa", "--policy", "modelscale", "--json"]
ARRAYS = ("ttft", "tpot", "cold", "times", "replicas", "warmed", "running", "waiting")
WINDOW_ARRAYS = ("requests", "p99_ttft", "p99_tpot", "p99_ttft_over_target", "ok_requests", "met")


def _digest(a: np.ndarray[Any, Any]) -> str:
    a = np.ascontiguousarray(a)
    return f"{hashlib.sha256(a.tobytes()).hexdigest()[:20]}:{a.dtype}:{a.shape}"


def _summary(r: engine.RunResult) -> dict[str, str]:
    out = {name: _digest(getattr(r, name)) for name in (*ARRAYS, "kv_usage", "startup_s")}
    assert r.windows is not None
    out |= {f"windows.{n}": _digest(getattr(r.windows, n)) for n in WINDOW_ARRAYS}
    out |= {
        "replica_seconds": repr(r.replica_seconds),
        "scale_events": repr(r.scale_events),
        "requests": repr(r.requests),
        "rejected": repr(r.rejected),
        "cold_requests": repr(r.cold_requests),
        "classes": repr(r.classes),
    }
    return out


def _policy(name: str, params: ReplicaParams) -> engine.Policy:
    if name == "modelscale":
        # At its defaults, as the benchmark runs it (only the SLO given).
        given = SimpleNamespace(slo=suite.DEFAULT_SLO, sizing=SIZING)
        config = suite.ours_config(given)  # type: ignore[arg-type]
        return ours.Modelscale(config=config, params=params, recommend=None)
    if name == "static":
        return baselines.StaticPeak(replicas=2)
    return peers.build(name, sizing=SIZING)  # as deployed: traffic from container-ready


def _cases() -> list[tuple[str, trace.Trace | trace.TraceStream, ReplicaParams, str, float]]:
    conv = TRACES / "azure2023_conv_normalized.csv.gz"
    servegen = TRACES / "servegen_language_m-large_10min.csv.gz"
    shedding = ServingPolicy(
        classes=(
            PriorityClass("interactive", 0.5, max_queue=5, timeout_s=4.0),
            PriorityClass("batch", 0.5, max_queue=40),
        ),
        ordered=True,
    )
    return [
        ("conv", trace.load(conv, duration_s=900), ReplicaParams(), "least-loaded", 0.5),
        (
            "servegen-stream",
            trace.stream(servegen, start_s=28800, duration_s=1800, rate_scale=0.1),
            ReplicaParams(),
            "round-robin",
            1.0,
        ),
        (
            "conv-x3-shedding",
            trace.load(conv, duration_s=600, rate_scale=3.0),
            ReplicaParams(serving=shedding),
            "least-loaded",
            0.5,
        ),
    ]


POLICIES = {"conv": ("hpa", "modelscale"), "servegen-stream": ("hpa", "modelscale")}


def replays() -> dict[str, dict[str, str]]:
    out = {}
    for name, tr, params, routing, dt in _cases():
        for policy in POLICIES.get(name, ("static",)):
            result = engine.run(
                tr,
                _policy(policy, params),
                params=params,
                initial_replicas=2,
                max_replicas=64,
                dt=dt,
                routing=routing,
                slo=suite.DEFAULT_SLO,
                seed=3,
            )
            out[f"{name}/{policy}"] = _summary(result)
    return out


def cli_json() -> str:
    buf = io.StringIO()
    with redirect_stdout(buf):
        code = cli.main(["--trace", str(TRACES / "azure2023_conv_normalized.csv.gz"), *CLI_ARGS])
    assert code == 0
    return buf.getvalue()


@pytest.fixture(scope="module")
def golden() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(GOLDEN.read_text())
    return loaded


@pytest.fixture(scope="module")
def fast() -> dict[str, dict[str, str]]:
    return replays()


def test_replays_are_bit_identical_to_main_before_the_speed_ups(
    golden: dict[str, Any], fast: dict[str, dict[str, str]]
) -> None:
    assert fast.keys() == golden["replays"].keys()
    for case, figures in fast.items():
        assert figures == golden["replays"][case], case


def test_simulate_json_is_what_main_printed_before_the_speed_ups(golden: dict[str, Any]) -> None:
    assert cli_json() == golden["cli"]


def test_the_python_paths_for_a_few_requests_agree_with_the_vectorised_ones(
    fast: dict[str, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # few = 0: every admission, completion and ITL takes the vectorised path.
    monkeypatch.setattr(traffic.Engine, "few", 0)
    assert replays() == fast


if __name__ == "__main__":  # regenerate the golden file (see the module docstring)
    doc = {"replays": replays(), "cli": cli_json()}
    GOLDEN.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN}", file=sys.stderr)
