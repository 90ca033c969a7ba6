"""The circuit breaker queries Prometheus through the operator's guarded session: a URL named
in a spec that the allow-list does not admit is never contacted (SSRF), and an admitted one
is queried and read. A real local HTTP server stands in for Prometheus and counts requests."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator

import pytest

from modelscale.loops import breaker
from modelscale.metrics import connection, prometheus, transport


class _Counting(http.server.ThreadingHTTPServer):
    hits = 0


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Counting

    def do_GET(self) -> None:
        self.server.hits += 1
        body = json.dumps(
            {
                "status": "success",
                "data": {
                    "resultType": "vector",
                    "result": [{"metric": {"namespace": "ns", "pod": "p-0"}, "value": [0, "2.5"]}],
                },
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[_Counting]:
    srv = _Counting(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def _url(srv: _Counting) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}"


def test_a_url_the_allow_list_refuses_is_never_contacted(server: _Counting) -> None:
    access = connection.access(default_url="http://prometheus.monitoring.svc:9090")
    with (
        transport.session(access) as session,
        pytest.raises(prometheus.PrometheusError, match="not allowed by the operator"),
    ):
        breaker._fetch(_url(server), 30, "nv_inference_request_failure", session=session)
    assert server.hits == 0


def test_an_allowed_url_is_queried_and_read(server: _Counting) -> None:
    access = connection.access(default_url=_url(server))
    with transport.session(access) as session:
        signals = breaker._fetch(_url(server), 30, "nv_inference_request_failure", session=session)
    assert server.hits == 3  # success, failure, duration
    assert signals["success"] == {("ns", "p-0"): 2.5}
