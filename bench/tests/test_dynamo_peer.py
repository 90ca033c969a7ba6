"""NVIDIA Dynamo's planner peer, run from the installed `ai-dynamo` package.

These tests need the optional `peers` extra and FAIL without it (`make bench-peers-test`
installs it and runs them; `make test` does not collect this directory):

    .venv/bin/python -m pytest -q bench/tests
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest

from modelscale.simulate import dynamo_peer, engine, peers
from modelscale.simulate.replica import ReplicaParams
from modelscale.simulate.trace import Trace

SIZING = peers.Sizing(tokens_per_s=1000.0, concurrency=20.0, running_per_replica=18.0, kv_usage=0.6)


def traffic(rps: float, *, osl: float = 100.0, isl: float = 200.0) -> dynamo_peer.Traffic:
    return dynamo_peer.Traffic(duration_s=180.0, num_req=rps * 180.0, isl=isl, osl=osl)


def test_the_planner_code_comes_from_the_installed_package() -> None:
    d = dynamo_peer.load()
    assert d.version == "1.6.1"
    for module in (d.predictors, d.throughput, d.planner_config):
        assert module.__file__ is not None
        assert "site-packages/dynamo/planner/" in Path(module.__file__).as_posix()
    assert set(d.predictors.LOAD_PREDICTORS) == set(peers.DYNAMO_PREDICTORS)
    assert dynamo_peer.LOADED_VIA in {"package", "bare-packages"}


def test_planner_follows_its_package_defaults() -> None:
    planner = peers.build("dynamo-arima", sizing=SIZING)
    assert isinstance(planner, dynamo_peer.DynamoPlanner)
    assert planner.interval_s == 180.0  # throughput_adjustment_interval_seconds
    assert planner.config.max_throughput_scaling_replicas == 8
    assert planner.config.enable_throughput_scaling
    assert not planner.config.enable_load_scaling


@pytest.mark.parametrize(
    ("rps", "osl", "ready", "pending", "expected"),
    [
        # 10 req/s x 100 tokens over 1,000 tok/s per replica -> ceil(10 / 10) = 1.
        pytest.param(10.0, 100.0, 1, 0, None, id="enough-no-change"),
        # 35 req/s: ceil(35 / 10) = 4.
        pytest.param(35.0, 100.0, 1, 0, 4, id="ceil-demand-over-capacity"),
        # Longer outputs: 1,000 / 250 = 4 req/s per replica; 10 req/s -> 3.
        pytest.param(10.0, 250.0, 1, 0, 3, id="capacity-follows-output-length"),
        # 200 req/s wants 20, capped at current + 8 per observation.
        pytest.param(200.0, 100.0, 2, 0, 10, id="max-throughput-scaling-replicas"),
        # Replicas still starting and the planner wants more: hold.
        pytest.param(50.0, 100.0, 2, 2, None, id="holds-while-pending"),
        # No demand: down to the endpoint floor (min_endpoint = 1).
        pytest.param(0.0, 100.0, 4, 0, 1, id="idle-to-min-endpoint"),
    ],
)
def test_throughput_replica_calculation(
    rps: float, osl: float, ready: int, pending: int, expected: int | None
) -> None:
    planner = peers.build("dynamo-constant", sizing=SIZING)
    assert isinstance(planner, dynamo_peer.DynamoPlanner)
    if rps == 0.0:  # the idle skip: live traffic first, then silence
        planner.plan(traffic=traffic(10.0), ready=ready, pending=0)
    got = planner.plan(traffic=traffic(rps, osl=osl), ready=ready, pending=pending)
    assert got == expected


@pytest.mark.parametrize("predictor", peers.DYNAMO_PREDICTORS)
def test_each_predictor_follows_a_ramp(predictor: str) -> None:
    """Dynamo's own predictor on a short synthetic series: demand ramps from 5 to 40
    req/s over 16 intervals; the planner follows it up and its forecasts stay finite."""
    planner = peers.build(f"dynamo-{predictor}", sizing=SIZING)
    assert isinstance(planner, dynamo_peer.DynamoPlanner)
    ready, path = 1, []
    for k in range(16):
        new = planner.plan(traffic=traffic(5.0 + k * 35.0 / 15), ready=ready, pending=0)
        ready = new if new is not None else ready
        path.append(ready)
        assert planner.last_prediction is not None
        assert all(math.isfinite(v) and v >= 0 for v in planner.last_prediction)
    assert path[0] == 1
    assert 3 <= path[-1] <= 6  # 40 req/s needs 4
    assert all(b >= a - 1 for a, b in itertools.pairwise(path))


def test_planner_scales_a_replay_up_on_a_load_step() -> None:
    rng = np.random.default_rng(0)
    a = rng.uniform(0, 600, rng.poisson(4.0 * 600))
    b = rng.uniform(600, 1800, rng.poisson(30.0 * 1200))
    arrivals = np.sort(np.concatenate([a, b]))
    n = arrivals.size
    tr = Trace(
        name="step",
        arrival_s=arrivals,
        input_tokens=np.full(n, 200, dtype=np.int64),
        output_tokens=np.full(n, 100, dtype=np.int64),
        duration_s=1800.0,
    )
    result = engine.run(
        tr,
        peers.build("dynamo-kalman", sizing=SIZING),
        params=ReplicaParams(),
        initial_replicas=1,
    )
    # 30 req/s x 100 tokens = 3 replicas' worth; decisions every 180 s.
    assert result.replicas[result.times < 540].max() == 1
    assert result.replicas[result.times > 1200].max() >= 3
