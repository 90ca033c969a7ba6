"""Scoring of one `make bench-live` run (e2e/harness/live_score.py), without the cluster."""

from __future__ import annotations

import math

import pytest

from harness import live_score, loadgen
from harness.live_score import PodLife, Scoring, Segment

T0 = 1_000_000.0  # the replay's start (Unix time)


def rec(
    i: int, *, at: float, latency: float = 0.5, ip: str | None = "10.0.0.1", outcome: str = "ok"
) -> loadgen.RequestRecord:
    """Request `i`, scheduled and sent `at` s into the run; `ip` None: it found no endpoint."""
    endpoint = None if ip is None else f"{ip}:8000"
    served = 64 if outcome == loadgen.OK else 0
    return loadgen.RequestRecord(i, at, T0 + at, latency, endpoint, outcome, 10, 64, served)


def pod(name: str, ip: str, *, created: float, warm: float | None, gone: float | None = None):
    return PodLife(
        name=name,
        ip=ip,
        created=T0 + created,
        ready_at=None if warm is None else T0 + warm,
        warm_from=None if warm is None else T0 + warm,
        gone_at=None if gone is None else T0 + gone,
    )


@pytest.mark.parametrize(
    ("pods", "expected"),
    [
        pytest.param([pod("a", "1", created=-50, warm=-40)], 100.0, id="existed-all-run"),
        pytest.param([pod("a", "1", created=30, warm=40)], 70.0, id="added-at-30"),
        pytest.param([pod("a", "1", created=-5, warm=0, gone=20)], 20.0, id="gone-at-20"),
        pytest.param(
            [pod("a", "1", created=0, warm=1), pod("b", "2", created=90, warm=95, gone=200)],
            110.0,
            id="two-pods-clipped-to-the-run",
        ),
    ],
)
def test_replica_seconds_are_pod_lifetimes_inside_the_run(pods, expected):
    assert live_score.replica_seconds(pods, start=T0, end=T0 + 100) == pytest.approx(expected)


def test_replica_seconds_refuse_a_run_that_ends_before_it_starts():
    with pytest.raises(ValueError, match="before it starts"):
        live_score.replica_seconds([], start=T0, end=T0 - 1)


def test_scale_events_are_changes_inside_the_run_only():
    replicas = [(T0 - 5, 1), (T0 + 1, 1), (T0 + 2, 2), (T0 + 3, 2), (T0 + 9, 3), (T0 + 20, 1)]
    events = live_score.scale_events(replicas, start=T0, end=T0 + 10)
    assert [(e.t - T0, e.from_replicas, e.to_replicas) for e in events] == [(2, 1, 2), (9, 2, 3)]


def test_cold_requests_gated_pods_count_requests_before_the_gate_opened():
    pods = [pod("a", "10.0.0.1", created=-30, warm=-20), pod("b", "10.0.0.2", created=10, warm=20)]
    records = [
        rec(0, at=5, ip="10.0.0.1"),
        rec(1, at=15, ip="10.0.0.2"),  # before b's gate: cold
        rec(2, at=25, ip="10.0.0.2"),
        rec(3, at=26, ip="10.0.0.9"),  # no known pod: cold
        rec(4, at=27, ip=None, outcome=loadgen.NO_ENDPOINT),
    ]
    cold = live_score.cold_requests(records, pods, cold_per_pod=4)
    assert [r.index for r in cold] == [1, 3]


def test_cold_requests_ungated_pods_count_their_first_requests():
    pods = [
        pod("warmed-by-hand", "10.0.0.1", created=-30, warm=0),
        PodLife(
            "added", "10.0.0.2", created=T0 + 10, ready_at=T0 + 12, warm_from=None, gone_at=None
        ),
    ]
    records = [rec(i, at=13 + i, ip="10.0.0.2") for i in range(6)] + [rec(9, at=14, ip="10.0.0.1")]
    cold = live_score.cold_requests(records, pods, cold_per_pod=4)
    assert sorted(r.index for r in cold) == [0, 1, 2, 3]


def test_a_reused_ip_belongs_to_the_newest_pod_created_before_the_request():
    pods = [
        pod("old", "10.0.0.1", created=-30, warm=-20, gone=10),
        pod("new", "10.0.0.1", created=20, warm=30),
    ]
    records = [rec(0, at=5), rec(1, at=25), rec(2, at=35)]
    assert [r.index for r in live_score.cold_requests(records, pods, cold_per_pod=4)] == [1]


def test_score_a_run_with_a_scale_up_after_the_step():
    # 30 s: windows 0 and 1 fast, window 2 has one failure (a miss); half of window 1's
    # requests go to a pod added after the load step at 8 s, once it is warm.
    records = [rec(i, at=float(i), latency=0.5) for i in range(10)]
    records += [rec(10 + i, at=10.0 + i, ip="10.0.0.2" if i % 2 else "10.0.0.1") for i in range(10)]
    records += [rec(20 + i, at=20.0 + i) for i in range(9)]
    records += [rec(29, at=29.0, latency=5.0, outcome=loadgen.TIMEOUT)]
    result = loadgen.ReplayResult(records=records, started_at=T0, finished_at=T0 + 30)
    pods = [pod("a", "10.0.0.1", created=-60, warm=-50), pod("b", "10.0.0.2", created=9, warm=10.5)]
    replicas = [(T0 + t, 1 if t < 9 else 2) for t in range(0, 31)]
    report = live_score.score(
        policy="p",
        result=result,
        pods=pods,
        replicas=replicas,
        scoring=Scoring([Segment("quiet", 0, 10), Segment("step", 10, 30)], 8.0, 2.0, 4),
    )
    assert (report.windows, report.windows_met) == (3, 2)
    assert report.slo_attainment_windows == pytest.approx(2 / 3)
    assert report.slo_attainment_requests == pytest.approx(29 / 30)
    assert report.windows_met_by_segment == {"quiet": (1, 1), "step": (1, 2)}
    assert (report.ok, report.failed, report.no_endpoint) == (29, 1, 0)
    assert report.replica_seconds == pytest.approx(30 + 21)
    assert report.cold_requests == 0  # b's first request came after its gate opened
    assert report.scale_events == 1 and report.scale_timeline == [(9.0, 1, 2)]
    assert report.first_scale_up_s == pytest.approx(1.0)
    assert report.first_added_ready_s == pytest.approx(2.5)
    assert report.max_replicas == 2


def test_score_without_any_scale_up_says_never():
    records = [rec(i, at=float(i)) for i in range(5)]
    result = loadgen.ReplayResult(records=records, started_at=T0, finished_at=T0 + 5)
    report = live_score.score(
        policy="static",
        result=result,
        pods=[pod("a", "10.0.0.1", created=-60, warm=-50)],
        replicas=[(T0 + t, 3) for t in range(6)],
        scoring=Scoring(segments=[], load_step_s=1.0, slo_p99_s=2.0, cold_per_pod=4),
    )
    assert report.first_scale_up_s is None and report.first_added_ready_s is None
    assert report.scale_events == 0 and report.max_replicas == 3
    assert not math.isnan(report.slo_attainment_windows)
