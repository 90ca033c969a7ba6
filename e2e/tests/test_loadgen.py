"""Trace replay with real tritonclient requests against real tritonservers on 127.0.78.x."""

from __future__ import annotations

import gzip
import itertools
import pathlib
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from harness import loadgen, triton

TRACE = pathlib.Path(__file__).resolve().parents[1] / "traces" / "azure2023_conv_normalized.csv.gz"
ADDRESSES = ("127.0.78.1", "127.0.78.2")


# --- trace reading (no server) -----------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "expect_count", "expect_first", "expect_last_t_max"),
    [
        pytest.param({"duration_s": 60.0}, 191, (0.0, 374, 44), 60.0, id="first-minute"),
        pytest.param({"max_requests": 10}, 10, (0.0, 374, 44), None, id="request-cap"),
        pytest.param(
            {"duration_s": 60.0, "speedup": 10.0}, 191, (0.0, 374, 44), 6.0, id="speedup-10x"
        ),
        pytest.param(
            {"start_s": 4.4, "max_requests": 2}, 2, (0.141877, 879, 55), None, id="start-offset"
        ),
    ],
)
def test_read_trace_selects_and_scales(
    *,
    kwargs: dict[str, Any],
    expect_count: int,
    expect_first: tuple[float, int, int],
    expect_last_t_max: float | None,
) -> None:
    requests = loadgen.read_trace(TRACE, **kwargs)
    assert len(requests) == expect_count
    first = requests[0]
    assert (round(first.t_s, 6), first.input_tokens, first.output_tokens) == expect_first
    assert [r.t_s for r in requests] == sorted(r.t_s for r in requests)
    if expect_last_t_max is not None:
        assert requests[-1].t_s < expect_last_t_max


def test_read_trace_accepts_plain_csv(tmp_path: pathlib.Path) -> None:
    plain = tmp_path / "trace.csv"
    plain.write_bytes(gzip.decompress(TRACE.read_bytes()))
    assert loadgen.read_trace(plain, max_requests=50) == loadgen.read_trace(TRACE, max_requests=50)


def test_endpoint_poller_keeps_last_list_when_fetch_fails() -> None:
    answers: Iterator[list[str] | Exception] = iter(
        [["10.0.0.1:8000"], RuntimeError("apiserver down")]
    )

    def fetch() -> list[str]:
        item = next(answers)
        if isinstance(item, Exception):
            raise item
        return item

    poller = loadgen.EndpointPoller(fetch, interval_s=3600)
    poller.refresh()
    poller.refresh()
    assert poller() == ["10.0.0.1:8000"]


# --- against real servers ----------------------------------------------------------------


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[triton.LocalTriton]]:
    handles = [
        triton.start_local(address=a, workdir=tmp_path_factory.mktemp(f"loadgen-{a}"))
        for a in ADDRESSES
    ]
    try:
        for h in handles:
            triton.wait_ready(h)
        yield handles
    finally:
        for h in handles:
            triton.stop(h)


def successes(server: triton.LocalTriton) -> float:
    """Triton's own count of successful requests for toy_llm: what the server really saw."""
    with urllib.request.urlopen(server.metrics_url, timeout=5) as resp:
        text = resp.read().decode()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.startswith("nv_inference_request_success") and s.labels["model"] == "toy_llm":
                return s.value
    return 0.0


def test_replays_a_trace_slice_against_one_server(servers: list[triton.LocalTriton]) -> None:
    server = servers[0]
    before = successes(server)
    # First minute of the conversation trace at 10x: 191 requests in about 6 s.
    result = loadgen.replay_trace(
        TRACE,
        endpoints=lambda: [server.http_url],
        duration_s=60.0,
        speedup=10.0,
        max_output_tokens=16,
        timeout_s=30.0,
    )
    summary = result.summary()
    assert (summary.count, summary.ok, summary.errors, summary.no_endpoint) == (191, 191, 0, 0)
    assert summary.per_endpoint == {server.http_url: 191}
    assert all(r.output_tokens == r.max_tokens for r in result.records)
    assert all(r.pod_ip == server.address for r in result.records)
    assert summary.p50_s is not None and summary.p99_s is not None
    assert 0 < summary.p50_s <= summary.p99_s
    assert successes(server) - before == 191


def test_spreads_requests_over_ready_endpoints(servers: list[triton.LocalTriton]) -> None:
    urls = [s.http_url for s in servers]
    result = loadgen.replay_trace(
        TRACE, endpoints=lambda: urls, max_requests=60, speedup=20.0, max_output_tokens=8
    )
    summary = result.summary()
    assert summary.ok == 60
    assert set(summary.per_endpoint) == set(urls)
    assert min(summary.per_endpoint.values()) >= 20, summary.per_endpoint


def test_no_ready_endpoint_is_a_gateway_503_and_sends_nothing(
    servers: list[triton.LocalTriton],
) -> None:
    before = [successes(s) for s in servers]
    result = loadgen.replay_trace(TRACE, endpoints=list, max_requests=20, speedup=50.0)
    summary = result.summary()
    assert (summary.count, summary.no_endpoint, summary.ok, summary.errors) == (20, 20, 0, 0)
    assert all(r.endpoint is None and r.latency_s is None for r in result.records)
    assert [successes(s) for s in servers] == before


def test_endpoints_are_read_per_request(servers: list[triton.LocalTriton]) -> None:
    # The list changes under the replay (pods becoming ready): each request sees the current one.
    calls = itertools.count()
    url = servers[1].http_url
    result = loadgen.replay(
        loadgen.read_trace(TRACE, max_requests=12, speedup=50.0),
        endpoints=lambda: [] if next(calls) < 5 else [url],
        max_concurrency=1,
        max_output_tokens=4,
    )
    by_send_time = sorted(result.records, key=lambda r: r.sent_at)
    assert [r.outcome for r in by_send_time] == [loadgen.NO_ENDPOINT] * 5 + [loadgen.OK] * 7


def test_unreachable_endpoint_is_an_error_not_a_crash() -> None:
    result = loadgen.replay_trace(
        TRACE, endpoints=lambda: ["127.0.78.9:8000"], max_requests=5, speedup=50.0, timeout_s=5
    )
    summary = result.summary()
    assert (summary.errors, summary.ok) == (5, 0)
    assert all(r.error for r in result.records)


def test_background_replay_can_be_stopped_early(servers: list[triton.LocalTriton]) -> None:
    requests = loadgen.read_trace(TRACE, duration_s=600.0)  # 10 minutes at real speed
    running = loadgen.start_replay(
        requests, endpoints=lambda: [servers[0].http_url], max_output_tokens=4
    )
    time.sleep(5.0)
    running.stop()
    result = running.wait(timeout_s=30)
    assert 0 < len(result.records) < len(requests)
    assert result.summary().errors == 0


# --- EndpointSlices on the real apiserver ------------------------------------------------


def _slice(name: str, service: str, ports: dict[str, int], endpoints: list[dict[str, Any]]) -> Any:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": name,
            # Hand-made slices of a selector-less Service: no controller rewrites them.
            "labels": {
                "kubernetes.io/service-name": service,
                "endpointslice.kubernetes.io/managed-by": "modelscale-tests",
            },
        },
        "addressType": "IPv4",
        "ports": [{"name": n, "port": p, "protocol": "TCP"} for n, p in ports.items()],
        "endpoints": endpoints,
    }


@pytest.mark.cluster
@pytest.mark.parametrize(
    ("port_name", "expected"),
    [
        pytest.param(
            "http",
            ["198.18.9.1:8000", "198.18.9.3:8000", "198.18.9.4:8000"],
            id="ready-and-unknown-endpoints-of-all-slices",
        ),
        pytest.param(
            "metrics", ["198.18.9.1:8002", "198.18.9.3:8002"], id="only-slices-with-the-port"
        ),
    ],
)
def test_ready_endpoints_from_slices(
    *, kube_api: Any, namespace: str, port_name: str, expected: list[str]
) -> None:
    core, discovery = client.CoreV1Api(kube_api), client.DiscoveryV1Api(kube_api)
    service: Any = {
        "metadata": {"name": "toy"},
        "spec": {"ports": [{"name": "http", "port": 8000}]},
    }
    core.create_namespaced_service(namespace, service)
    slices = [
        _slice(
            "toy-a",
            "toy",
            {"http": 8000, "metrics": 8002},
            [
                {"addresses": ["198.18.9.1"], "conditions": {"ready": True}},
                {"addresses": ["198.18.9.2"], "conditions": {"ready": False}},
                {"addresses": ["198.18.9.3"], "conditions": {}},
            ],
        ),
        _slice(
            "toy-b",
            "toy",
            {"http": 8000},
            [
                {"addresses": ["198.18.9.4"], "conditions": {"ready": True}},
                {
                    "addresses": ["198.18.9.5"],
                    "conditions": {"ready": False, "serving": True, "terminating": True},
                },
            ],
        ),
        _slice("other", "other", {"http": 8000}, [{"addresses": ["198.18.9.9"], "conditions": {}}]),
    ]
    for body in slices:
        discovery.create_namespaced_endpoint_slice(namespace, body)
    assert loadgen.ready_endpoints_from_slices(discovery, namespace, "toy", port_name) == expected
    # An ApiClient works as well (the lead's fixtures hand one out).
    assert loadgen.ready_endpoints_from_slices(kube_api, namespace, "toy", port_name) == expected
