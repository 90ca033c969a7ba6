"""The whole-request deadline holds when Prometheus is reached through a proxy.

requests sends proxied requests through urllib3's ProxyManager, whose connections were not
the deadline adapter's: through a proxy that relays the answer one byte every 0.8 s, a
`timeout=1` query ran for minutes. The proxy here is a real forward/CONNECT proxy
(`http.server`) that relays, or dribbles on purpose (failure injection: a real proxy cannot
be made to stall so), its CONNECT answer, the tunnel (a TLS handshake that never ends) or
the relayed answer. The upstream is the fault servers' fast answer.
"""

from __future__ import annotations

import contextlib
import http.client
import http.server
import json
import socket
import threading
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
import requests

from harness import faultservers
from modelscale.metrics import prometheus, promql

EMPTY = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}})
ANSWER = faultservers.http_answer(EMPTY.encode())
QUERY = {promql.TOKEN_RATE: promql.Query(promql.TOKEN_RATE, "up", promql.Kind.SUM)}
EVERY = 0.8  # seconds between two bytes when the proxy dribbles
# What a TLS server's first record starts with, then filler: the client waits for more.
HANDSHAKE = b"\x16\x03\x03\x00\x7a" + b"\x02" * 120


class _Proxy(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, *, fault: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.fault = fault
        self.seen: list[str] = []  # request lines, to show the query went through the proxy
        self.stop = threading.Event()


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Proxy

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, data: bytes, *, dribble: bool) -> None:
        if not dribble:
            self.wfile.write(data)
            return
        for i in range(len(data)):
            if self.server.stop.wait(EVERY):
                return
            self.wfile.write(data[i : i + 1])
            self.wfile.flush()

    def do_GET(self) -> None:  # a forwarding proxy: the request line holds the whole URL
        self.server.seen.append(self.requestline)
        url = urlsplit(self.path)
        upstream = http.client.HTTPConnection(url.hostname or "", url.port or 80, timeout=5)
        try:
            upstream.request("GET", url.path + (f"?{url.query}" if url.query else ""))
            answer = upstream.getresponse()
            body = answer.read()
        finally:
            upstream.close()
        head = f"HTTP/1.1 {answer.status} {answer.reason}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in answer.getheaders() if k != "Connection")
        relayed = head.encode() + b"Connection: close\r\n\r\n" + body
        self._send(relayed, dribble=self.server.fault == "relay")
        self.close_connection = True

    def do_CONNECT(self) -> None:  # a tunnel: only the faults are served here
        self.server.seen.append(self.requestline)
        established = b"HTTP/1.1 200 Connection established\r\n\r\n"
        self._send(established, dribble=self.server.fault == "connect")
        self._send(HANDSHAKE, dribble=True)
        self.close_connection = True


@contextlib.contextmanager
def proxy(*, fault: str) -> Iterator[_Proxy]:
    server = _Proxy(fault=fault)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield server
    finally:
        server.stop.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=2)


def _url(server: _Proxy) -> str:
    host, port = server.server_address[:2]
    return f"http://{host!s}:{port}"


def _proxied(url: str) -> requests.Session:
    session = requests.Session()
    session.proxies = {"http": url, "https": url}
    return session


@pytest.fixture
def no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    ("fault", "prometheus_url"),
    [
        # Through a forwarding proxy (an http:// Prometheus): the relayed answer dribbles.
        pytest.param("relay", None, id="relayed-answer-dribbles"),
        # Through a CONNECT tunnel (an https:// Prometheus): the proxy's own answer dribbles,
        # or the tunnel does, so the TLS handshake never completes (CPython's `ssl` bounds a
        # handshake by the socket's timeout as a whole; kept so that stays true).
        pytest.param("connect", "https://prometheus.example:9090", id="connect-answer-dribbles"),
        pytest.param("tunnel", "https://prometheus.example:9090", id="tls-handshake-dribbles"),
    ],
)
def test_a_one_second_query_through_a_stalling_proxy_fails_within_one_and_a_half_seconds(
    fault: str, prometheus_url: str | None, no_proxy_env: None
) -> None:
    with faultservers.dribbling(ANSWER, every=0.001) as (host, port), proxy(fault=fault) as srv:
        url = prometheus_url or f"http://{host}:{port}"
        started = time.monotonic()
        with pytest.raises(prometheus.PrometheusError, match=r"no complete answer within 1\.25 s"):
            prometheus.fetch_signals(
                url=url, queries=QUERY, pods={}, timeout=1.0, session=_proxied(_url(srv))
            )
        took = time.monotonic() - started
        assert srv.seen, "the query did not go through the proxy"
    assert took < 1.5, f"the query took {took:.2f} s"


def test_the_proxy_from_the_environment_is_held_to_the_deadline_too(
    monkeypatch: pytest.MonkeyPatch, no_proxy_env: None
) -> None:
    """A plain session (the circuit breaker's) takes HTTP_PROXY from the environment."""
    with faultservers.dribbling(ANSWER, every=0.001) as (host, port), proxy(fault="relay") as srv:
        monkeypatch.setenv("HTTP_PROXY", _url(srv))
        started = time.monotonic()
        with pytest.raises(prometheus.PrometheusError, match=r"no complete answer within 1\.25 s"):
            prometheus.fetch_signals(url=f"http://{host}:{port}", queries=QUERY, pods={}, timeout=1)
        took = time.monotonic() - started
        assert srv.seen, "the query did not go through the proxy"
    assert took < 1.5, f"the query took {took:.2f} s"


def test_a_proxy_that_relays_in_time_is_read(no_proxy_env: None) -> None:
    with faultservers.dribbling(ANSWER, every=0.001) as (host, port), proxy(fault="none") as srv:
        got = prometheus.fetch_signals(
            url=f"http://{host}:{port}", queries=QUERY, pods={}, timeout=2.0,
            session=_proxied(_url(srv)),
        )  # fmt: skip
        assert srv.seen and srv.seen[0].startswith(f"GET http://{host}:{port}/api/v1/query?")
    assert got.queries == 1 and got.signals == {}


def test_a_socks_proxy_is_refused_with_what_to_do(no_proxy_env: None) -> None:
    listener = socket.socket()  # nothing must connect to it
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.2)
    try:
        port = listener.getsockname()[1]
        with pytest.raises(prometheus.PrometheusError, match="SOCKS proxy is not supported") as err:
            prometheus.fetch_signals(
                url="http://prometheus.example:9090", queries=QUERY, pods={}, timeout=1.0,
                session=_proxied(f"socks5://user:secret@127.0.0.1:{port}"),
            )  # fmt: skip
        assert "secret" not in str(err.value)
        with pytest.raises(TimeoutError):
            listener.accept()
    finally:
        listener.close()
