"""The peer registry: every peer builds from one Sizing, `scale` moves only its target,
bad input says what to fix, and each LLM-metric variant reacts to the load it reads."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from sim_trace import make_trace

from modelscale.simulate import baselines, dynamo_peer, engine, peers
from modelscale.simulate.replica import ReplicaParams
from modelscale.simulate.trace import Trace

SIZING = peers.Sizing(tokens_per_s=1000.0, concurrency=20.0, running_per_replica=18.0, kv_usage=0.6)
NON_DYNAMO = [n for n in peers.PEER_NAMES if not n.startswith("dynamo-")]


def test_registry_names_every_peer_and_at_least_one_dynamo_planner() -> None:
    assert {"hpa", "keda", "knative-kpa", "aibrix-apa"} <= set(peers.PEER_NAMES)
    assert {"hpa-running", "keda-waiting", "keda-in-flight", "aibrix-apa-kv"} <= set(
        peers.PEER_NAMES
    )
    assert any(n.startswith("dynamo-") for n in peers.PEER_NAMES)
    assert len(set(peers.PEER_NAMES)) == len(peers.PEER_NAMES)


@pytest.mark.parametrize("name", NON_DYNAMO)
def test_each_peer_builds_under_its_registry_name(name: str) -> None:
    policy = peers.build(name, sizing=SIZING)
    assert policy.name == name
    assert policy.warmup_gate is False  # as its users run it
    assert policy.interval_s > 0


@pytest.mark.parametrize("name", NON_DYNAMO)
def test_scale_multiplies_the_target_and_nothing_else(name: str) -> None:
    one = peers.build(name, sizing=SIZING)
    two = peers.build(name, sizing=SIZING, scale=2.0)
    assert two.target == pytest.approx(2.0 * one.target)  # type: ignore[attr-defined]
    assert two.interval_s == one.interval_s


@pytest.mark.parametrize(
    ("name", "target"),
    [
        ("hpa", 800.0),  # 0.8 x tokens/s
        ("hpa-running", 14.4),  # 0.8 x running per replica
        ("keda", 800.0),
        ("keda-waiting", 5.0),  # production-stack's threshold
        ("keda-in-flight", 16.0),  # 0.8 x concurrency
        ("knative-kpa", 14.0),  # concurrency x Knative's own utilisation 0.7
        ("aibrix-apa", 800.0),
        ("aibrix-apa-kv", 0.48),  # 0.8 x KV use
    ],
)
def test_targets_come_from_the_sizing(name: str, target: float) -> None:
    policy = peers.build(name, sizing=SIZING)
    assert policy.target == pytest.approx(target)  # type: ignore[attr-defined]


def test_unknown_peer_lists_the_choices() -> None:
    with pytest.raises(ValueError, match=r"unknown peer 'hpaa'; choose from hpa, hpa-running"):
        peers.build("hpaa", sizing=SIZING)
    with pytest.raises(ValueError, match="unknown Dynamo predictor 'lstm'"):
        peers.build("dynamo-lstm", sizing=SIZING)
    with pytest.raises(ValueError, match="scale must be > 0"):
        peers.build("hpa", sizing=SIZING, scale=0.0)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("tokens_per_s", 0.0, "Sizing.tokens_per_s must be > 0"),
        ("running_per_replica", -1.0, "Sizing.running_per_replica must be > 0"),
        ("kv_usage", 1.5, r"Sizing.kv_usage must be a fraction in \(0, 1\]"),
    ],
)
def test_bad_sizing_says_what_to_fix(field: str, value: float, message: str) -> None:
    values = {"tokens_per_s": 1.0, "concurrency": 1.0, "running_per_replica": 1.0, "kv_usage": 0.5}
    values[field] = value
    with pytest.raises(ValueError, match=message):
        peers.Sizing(**values)


def test_dynamo_without_the_package_names_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(dynamo_peer, "_LOADED", None)
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "dynamo" else real(name, *a)
    )
    with pytest.raises(dynamo_peer.DynamoMissingError, match=r"pip install -e '\.\[peers\]'"):
        peers.build("dynamo-arima", sizing=SIZING)


# ----------------------------------------------------------------- on a real replay


def step_trace(*, low: float, high: float, at: float, duration: float, seed: int = 0) -> Trace:
    """Poisson arrivals at `low` req/s, stepping to `high` at `at` seconds."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(0, at, rng.poisson(low * at))
    b = rng.uniform(at, duration, rng.poisson(high * (duration - at)))
    arrivals = np.sort(np.concatenate([a, b]))
    return make_trace("step", arrivals, inp=200, out=100, duration_s=duration)


def probe_sizing() -> peers.Sizing:
    """The sizing a load test would give for 1,000 tok/s per replica: one replica at
    10 req/s x 100 output tokens, its running requests and KV use read the way the peers
    read them (the engine's gauges, or their fallbacks)."""
    tr = step_trace(low=10.0, high=10.0, at=150.0, duration=300.0)
    kv_metric = baselines.kv_cache_usage_sum(fallback_per_running=SIZING.kv_per_running)
    seen: list[tuple[float, float]] = []

    class Probe:
        name, interval_s, warmup_gate = "probe", 15.0, True

        def decide(self, view: engine.View) -> int:
            if view.now >= 120.0:
                seen.append((baselines.running_requests(view), kv_metric(view)))
            return 1

    engine.run(tr, Probe(), params=ReplicaParams(), initial_replicas=1)
    running = float(np.mean([r for r, _ in seen]))
    kv = float(np.mean([k for _, k in seen]))
    return peers.Sizing(
        tokens_per_s=1000.0,
        concurrency=SIZING.concurrency,
        running_per_replica=max(running, 0.1),
        kv_usage=min(1.0, max(kv, 1e-6)),
    )


@pytest.fixture(scope="module")
def step_runs() -> dict[str, engine.RunResult]:
    # One replica sustains ~1,000 tok/s here; the step asks for ~4 replicas' worth.
    sizing = probe_sizing()
    tr = step_trace(low=4.0, high=40.0, at=240.0, duration=900.0)
    return {
        name: engine.run(
            tr, peers.build(name, sizing=sizing), params=ReplicaParams(), initial_replicas=1
        )
        for name in NON_DYNAMO
    }


@pytest.mark.parametrize("name", [n for n in NON_DYNAMO if n != "keda-waiting"])
def test_every_peer_scales_up_on_a_load_step(
    step_runs: dict[str, engine.RunResult], name: str
) -> None:
    result = step_runs[name]
    before = result.replicas[(result.times > 60) & (result.times < 240)]
    after = result.replicas[result.times > 600]
    assert before.max() <= 2, f"{name} over-provisioned before the step"
    assert after.max() >= 3, f"{name} never scaled up for a 10x load step"


def test_queue_threshold_peer_waits_for_a_queue(step_runs: dict[str, engine.RunResult]) -> None:
    # keda-waiting scales only once requests queue: it is late, not absent.
    result = step_runs["keda-waiting"]
    assert result.replicas[result.times > 600].max() >= 2


def test_running_and_waiting_requests_under_overload() -> None:
    tr = step_trace(low=30.0, high=30.0, at=100.0, duration=200.0)
    seen: list[tuple[float, float]] = []

    class Probe:
        name, interval_s, warmup_gate = "probe", 20.0, True

        def decide(self, view: engine.View) -> int:
            seen.append((baselines.running_requests(view), baselines.waiting_requests(view)))
            return 1

    engine.run(tr, Probe(), params=ReplicaParams(max_batch=8), initial_replicas=1)
    assert seen
    assert all(0 <= running <= 8 and waiting >= 0 for running, waiting in seen)
    assert all(running >= 1 for running, _ in seen)  # the pod is never idle
    assert any(waiting > 0 for _, waiting in seen)  # 30 req/s overloads 8 slots
