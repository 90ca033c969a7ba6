"""What `make demo` reports, on hand-made records: cold requests, replica-seconds, SLO
attainment and scale events are counted the way the summary says."""

from __future__ import annotations

import pathlib

from demo import report
from harness import loadgen
from modelscale.api.v1alpha1 import to_rfc3339

T0 = 1_800_000_000.0


def record(
    i: int, *, at: float, latency: float | None = 0.5, ip: str = "198.18.1.10"
) -> loadgen.RequestRecord:
    return loadgen.RequestRecord(
        index=i,
        scheduled_s=at,
        sent_at=T0 + at,
        latency_s=latency,
        endpoint=None if latency is None else f"{ip}:8000",
        outcome=loadgen.OK if latency is not None else loadgen.NO_ENDPOINT,
        input_tokens=10,
        max_tokens=64,
        output_tokens=64 if latency is not None else 0,
    )


def pod(ip: str, *, created: float, warm_after: float | None) -> dict[str, object]:
    annotations = {} if warm_after is None else {"modelscale.dev/seconds-to-warm": str(warm_after)}
    return {
        "metadata": {
            "name": f"pod-{ip}",
            "namespace": "demo",
            "creationTimestamp": to_rfc3339(created),
            "annotations": annotations,
            "labels": {"modelscale.dev/modeldeployment": "toy-llm"},
        },
        "status": {"podIP": ip},
    }


def sample(t: float, replicas: int, desired: int) -> report.Sample:
    return report.Sample.from_status(
        T0 + t, None, {"replicas": replicas, "desiredReplicas": desired, "readyReplicas": 1}
    )


def test_a_request_before_the_pod_was_warmed_counts_as_cold() -> None:
    pods = [
        pod("198.18.1.10", created=T0 - 100, warm_after=20),
        pod("198.18.2.10", created=T0 + 10, warm_after=15),
    ]
    records = [
        record(0, at=5, ip="198.18.1.10"),  # warm pod
        record(1, at=20, ip="198.18.2.10"),  # 10 s after creation, warmed at 15 s: cold
        record(2, at=30, ip="198.18.2.10"),  # after warm-up
        record(3, at=31, ip="198.18.9.9"),  # a pod never seen
    ]
    assert [r.index for r in report.cold_requests(records, pods)] == [1, 3]


def test_summary_counts_windows_replica_seconds_and_scale_events() -> None:
    records = [record(i, at=i * 1.0) for i in range(20)]  # windows [0,10) and [10,20)
    records[15] = record(15, at=15.0, latency=None)  # no endpoint: infinitely slow
    samples = [sample(0, 1, 1), sample(10, 2, 2), sample(15, 2, 2), sample(20, 1, 1)]
    pods = [pod("198.18.1.10", created=T0 - 100, warm_after=20)]
    summary = report.summarize(
        records=records,
        samples=samples,
        pods=pods,
        started_at=T0,
        finished_at=T0 + 20,
        slo_p99_s=2.0,
    )
    assert (summary.windows, summary.windows_within_slo, summary.slo_attainment) == (2, 1, 0.5)
    assert summary.requests_within_slo == 19 / 20
    assert summary.replica_seconds == 1 * 10 + 2 * 10
    assert (summary.scale_events, summary.peak_replicas, summary.cold_requests) == (2, 2, 0)
    assert "requests on cold pods: 0" in summary.lines()


def test_plot_writes_a_png(tmp_path: pathlib.Path) -> None:
    records = [record(i, at=i * 0.5) for i in range(100)]
    samples = [sample(t, 1 + (t > 20), 1 + (t > 20)) for t in range(0, 50, 2)]
    path = tmp_path / "report.png"
    report.plot(path, records=records, samples=samples, started_at=T0, slo_p99_s=2.0, title="t")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
