"""The harness of `make bench-live`, short: 30 s of the trace replayed through the ready
endpoints of one static, warmed replica of the toy model, sampled and scored the way the
benchmark scores every policy. The report's figures must come from the real records: the
windows the requests fell in, no request on a cold pod behind the gate, the replica-seconds
of the one pod that existed all along, no scale event."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
from toy_md import modeldeployment_body, toy_model, toy_server

from harness import live, live_score, loadgen, toy_load, userview
from harness.kubectl import Kubectl

pytestmark = pytest.mark.cluster

TRACE = pathlib.Path(__file__).resolve().parents[2] / "bench" / "traces"
SEGMENT_S = 30.0


@pytest.mark.usefixtures("operator")
def test_replay_of_a_segment_on_one_static_replica_is_scored_from_its_records(
    kubectl: Kubectl, kube_api: Any, namespace: str
) -> None:
    body = modeldeployment_body(
        "toy",
        namespace,
        {
            "model": toy_model("vllm"),
            "server": toy_server(toy_load.TOY_ENV),
            "minReplicas": 1,
            "maxReplicas": 1,
            "replicas": 1,
            "scaling": {"mode": "External"},
        },
    )
    requests = loadgen.read_trace(
        TRACE / "azure2023_conv_normalized.csv.gz", start_s=2880, duration_s=SEGMENT_S
    )
    scoring = live_score.Scoring(
        segments=[live_score.Segment("quiet", 0.0, SEGMENT_S)],
        load_step_s=10.0,
        slo_p99_s=toy_load.SLO_P99_S,
        cold_per_pod=int(toy_load.TOY_ENV["TOY_LLM_COLD_REQUESTS"]),
    )
    run = live.run(
        "static-1",
        cluster=live.Cluster(kubectl, kube_api),
        namespace=namespace,
        plan=live.Plan(live.md_setup("toy"), [body]),
        load=live.Load(requests=requests, scoring=scoring, replay=toy_load.REPLAY),
    )
    report, result = run.report, run.result
    print(f"\nlive smoke: {report.to_dict()}")

    assert report.requests == len(requests) == len(result.records) > 20
    assert report.ok == len(requests), dict(loadgen.iter_outcomes(result.records))
    windows = userview.windows(result.records, result.started_at)
    assert report.windows == len(windows) == 3
    assert report.windows_met == sum(w.p99_s <= toy_load.SLO_P99_S for w in windows)
    assert report.windows_met_by_segment == {"quiet": (report.windows_met, 3)}
    # One pod, there before the replay and after it, warmed by the operator first.
    assert len(run.pods) == 1 and run.pods[0].warm_from is not None
    assert run.pods[0].warm_from < result.started_at
    assert report.cold_requests == 0
    assert report.replica_seconds == pytest.approx(report.duration_s, abs=0.01)
    assert report.duration_s >= SEGMENT_S - 1
    assert report.scale_events == 0 and report.first_scale_up_s is None
    assert report.max_replicas == 1
    assert {r.pod_ip for r in result.records} == {run.pods[0].ip}
