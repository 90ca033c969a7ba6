"""A Prometheus query ends at its whole-request deadline, however the server stalls: a
server that dribbles one byte every 0.8 s (in the headers or in the body) or never
answers at all. These servers are fakes because a real Prometheus cannot be made to
misbehave so; answers from the real one are in tests/integration/test_prometheus_metrics.py."""

from __future__ import annotations

import json
import time

import pytest

from harness import faultservers
from modelscale.metrics import prometheus, promql

EMPTY = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}})
ANSWER = faultservers.http_answer(EMPTY.encode())
HEADERS_END = ANSWER.index(b"\r\n\r\n") + 4
QUERY = {promql.TOKEN_RATE: promql.Query(promql.TOKEN_RATE, "up", promql.Kind.SUM)}


@pytest.mark.parametrize(
    "server",
    [
        pytest.param(lambda: faultservers.dribbling(ANSWER, every=0.8), id="dribbles-headers"),
        pytest.param(
            # Headers at once (so `requests` returns a response), then the body dribbles.
            lambda: faultservers.dribbling(ANSWER, every=0.8, at_once=HEADERS_END),
            id="dribbles-body",
        ),
        pytest.param(faultservers.silent, id="never-answers"),
    ],
)
def test_a_one_second_query_fails_within_one_and_a_half_seconds(server: object) -> None:
    assert callable(server)
    with server() as (host, port):
        started = time.monotonic()
        with pytest.raises(prometheus.PrometheusError, match=r"no complete answer within 1\.25 s"):
            prometheus.fetch_signals(
                url=f"http://{host}:{port}", queries=QUERY, pods={}, timeout=1.0, time=None
            )
        took = time.monotonic() - started
    assert took < 1.5, f"the query took {took:.2f} s"


def test_a_server_that_answers_in_time_is_read() -> None:
    # Fast enough: the whole answer (≈ 160 bytes) in ≈ 0.2 s.
    with faultservers.dribbling(ANSWER, every=0.001) as (host, port):
        got = prometheus.fetch_signals(
            url=f"http://{host}:{port}", queries=QUERY, pods={}, timeout=2.0
        )
    assert got.queries == 1 and got.signals == {}
