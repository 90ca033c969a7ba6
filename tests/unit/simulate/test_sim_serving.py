"""The simulator's serving policy (simulate/serving.py): what a user of `modelscale
simulate --priority-split ...` sees — requests over a class's queue limit or timeout are
refused at once and counted, pods admit in class order, the trace's priority column is
read — and that without a policy every existing result stays byte for byte the same."""

from __future__ import annotations

import gzip
import json
import pathlib
from dataclasses import replace

import numpy as np
import pytest

from modelscale.simulate import cli, engine, serving, trace
from modelscale.simulate.baselines import StaticPeak
from modelscale.simulate.replica import ReplicaParams
from modelscale.simulate.serving import PriorityClass, ServingPolicy, ServingPolicyError
from modelscale.simulate.trace import Trace

ROOT = pathlib.Path(__file__).resolve().parents[3]
CONV = ROOT / "bench" / "traces" / "azure2023_conv_normalized.csv.gz"
# `modelscale simulate --trace CONV --duration 300 --policy hpa --json`, printed by main
# at 8eaf9aa, before the serving policy existed. A change MEANT to alter the default
# output (a replica-model change, a new key) regenerates it with that command and says so.
GOLDEN = pathlib.Path(__file__).parent / "data" / "golden_no_serving_policy.json"

TWO = (PriorityClass("interactive", 0.5), PriorityClass("batch", 0.5))


def burst(levels: list[int], *, out: int = 200, gap_s: float = 0.0) -> Trace:
    """Requests at t = 0, gap_s, 2 gap_s, ... with the given priority levels."""
    n = len(levels)
    return Trace(
        name="burst",
        arrival_s=np.arange(n) * gap_s,
        input_tokens=np.full(n, 100, dtype=np.int64),
        output_tokens=np.full(n, out, dtype=np.int64),
        duration_s=60.0,
        priority=np.array(levels, dtype=np.int64),
    )


def run(tr: Trace, policy: ServingPolicy | None, **params: float) -> engine.RunResult:
    p = ReplicaParams(startup_sigma=0.0, serving=policy, **params)  # type: ignore[arg-type]
    return engine.run(tr, StaticPeak(replicas=1), params=p, initial_replicas=1, drain_s=300)


def by_name(result: engine.RunResult) -> dict[str, serving.ClassStats]:
    return {c.name: c for c in result.classes}


def test_without_a_policy_simulate_prints_what_it_printed_before(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = cli.main(["--trace", str(CONV), "--duration", "300", "--policy", "hpa", "--json"])
    assert code == 0
    assert capsys.readouterr().out == GOLDEN.read_text()


def test_a_policy_that_only_labels_requests_changes_no_figure() -> None:
    # Classes drawn but no limit, no timeout and FIFO admission: the same replay.
    tr = trace.load(CONV, duration_s=300)
    plain = run(tr, None)
    labelled = run(tr, ServingPolicy(classes=TWO, ordered=False))
    for name in ("ttft", "tpot", "replicas", "running", "waiting", "kv_usage"):
        np.testing.assert_array_equal(getattr(plain, name), getattr(labelled, name))
    assert plain.replica_seconds == labelled.replica_seconds
    assert plain.classes == () and sum(c.requests for c in labelled.classes) == tr.requests
    assert {c.shed for c in labelled.classes} == {0}


def test_requests_over_a_class_queue_limit_are_refused_at_once_and_counted() -> None:
    # One pod running one sequence at a time; ten batch requests arrive together and two
    # interactive ones: batch may queue 2, interactive has no limit.
    policy = ServingPolicy(classes=(TWO[0], replace(TWO[1], max_queue=2)))
    result = run(burst([2] * 10 + [1, 1]), policy, max_batch=1)
    got = by_name(result)
    assert (got["batch"].requests, got["batch"].shed_queue_full) == (10, 8)
    assert got["batch"].max_wait_to_shed_s == 0.0  # refused on arrival
    assert (got["interactive"].shed, got["interactive"].requests) == (0, 2)
    # Shed requests never finish: they count as misses, in the class and overall.
    assert np.isinf(result.ttft).sum() == 8
    assert got["batch"].ok <= 2


def test_a_request_waiting_past_its_class_timeout_is_refused_within_a_tick() -> None:
    # One sequence at a time, 200 tokens each (~3 s): the third request waits too long.
    policy = ServingPolicy(classes=(replace(TWO[0], timeout_s=4.0), TWO[1]))
    result = run(burst([1, 1, 1]), policy, max_batch=1)
    got = by_name(result)["interactive"]
    assert (got.shed_timeout, got.shed_queue_full) == (1, 0)
    assert 4.0 <= got.max_wait_to_shed_s <= 4.0 + 0.5  # dt = 0.5 s
    assert np.isfinite(result.ttft).sum() == 2


def test_pods_admit_in_class_order_when_ordered() -> None:
    # Batch requests arrive first, the interactive one last, all in the same tick.
    levels = [2, 2, 2, 1]
    fifo = run(burst(levels), ServingPolicy(classes=TWO, ordered=False), max_batch=1)
    ordered = run(burst(levels), ServingPolicy(classes=TWO), max_batch=1)
    assert fifo.ttft[3] > fifo.ttft[:3].max()  # last in, last served
    assert ordered.ttft[3] < ordered.ttft[:3].min()  # served first


def test_a_trace_priority_column_gives_the_classes(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "t.csv.gz"
    rows = "t_s,input_tokens,output_tokens,priority\n0,10,5,1\n1,10,5,2\n2,10,5,2\n"
    path.write_bytes(gzip.compress(rows.encode()))
    tr = trace.load(path)
    assert tr.priority is not None and tr.priority.tolist() == [1, 2, 2]
    result = run(tr, ServingPolicy(classes=TWO))
    assert [(c.name, c.requests) for c in result.classes] == [("interactive", 1), ("batch", 2)]
    one = ServingPolicy(classes=(PriorityClass("only", 1.0),))
    too_few = r"levels span 1\.\.2 but the priority split names 1"
    with pytest.raises(ServingPolicyError, match=too_few):
        run(tr, one)


def test_a_fractional_priority_level_is_refused(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("t_s,input_tokens,output_tokens,priority\n0,10,5,1.5\n")
    with pytest.raises(trace.TraceError, match="priority levels must be whole numbers >= 1"):
        trace.load(path)


@pytest.mark.parametrize(
    ("split", "max_queue", "timeout", "message"),
    [
        pytest.param("a=0.5,b", None, None, "expected CLASS=NUMBER", id="no-number"),
        pytest.param("a=1,a=2", None, None, "class a given twice", id="twice"),
        pytest.param("a=1", "b=2", None, "--max-queue names b, not a class", id="unknown"),
        pytest.param("a=1", "a=2.5", None, "a whole number of requests", id="fractional"),
        pytest.param("a=1", None, "a=0", "queue timeout must be > 0 s", id="zero-timeout"),
        pytest.param("a=0,b=0", None, None, "add up to more than 0", id="no-share"),
        pytest.param("a=-1", None, None, "share must be >= 0", id="negative-share"),
    ],
)
def test_a_bad_serving_flag_says_what_to_fix(
    split: str, max_queue: str | None, timeout: str | None, message: str
) -> None:
    with pytest.raises(ServingPolicyError, match=message):
        serving.from_flags(split=split, max_queue=max_queue, timeout=timeout)


def test_simulate_reports_each_class_and_keeps_every_existing_key(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["--trace", str(CONV), "--duration", "300", "--policy", "hpa", "--json"]
    flags = ["--priority-split", "interactive=0.5,batch=0.5", "--max-queue", "batch=4"]
    assert cli.main([*argv, *flags, "--queue-timeout", "batch=5"]) == 0
    doc = json.loads(capsys.readouterr().out)
    golden = json.loads(GOLDEN.read_text())
    assert set(golden) <= set(doc) and set(doc) - set(golden) == {"serving"}
    assert [c["name"] for c in doc["serving"]["classes"]] == ["interactive", "batch"]
    hpa = doc["serving"]["per_class"]["hpa"]
    assert set(hpa) == {"interactive", "batch"}
    assert {"slo_attainment_requests", "shed", "shed_share", "p99_ttft_s"} <= set(hpa["batch"])
    assert hpa["interactive"]["shed"] == 0  # no limit on interactive


def test_serving_flags_without_a_split_are_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--trace", str(CONV), "--max-queue", "batch=3"]) == 2
    assert "need --priority-split" in capsys.readouterr().err
