"""A whole-request deadline for `requests`, which only has per-socket-operation timeouts.

`requests`' `timeout=(connect, read)` bounds each `recv`, so a server that sends one byte
every 0.8 s keeps a `timeout=1` request alive for as long as it likes (a fetch was held
> 25 s that way). urllib3's `Timeout(total=...)` has the same gap: the read timeout is set
once per request, not per byte. Neither library offers a wall-clock bound, hence this
small shell:

    session.mount(url, deadline.Adapter())
    with deadline.within(seconds=2.0) as watch:
        session.get(url, timeout=2.0)   # raises a requests error once the 2 s are up
    watch.expired                       # True if the deadline cut the request off

While the `within` block runs, every socket a connection of this thread opens or reuses is
registered (as a duplicate of its file descriptor, so it still names that socket after
`ssl` wraps it); at the deadline a timer shuts them down, which wakes the blocked call at
once (urllib3 then drops the connection instead of pooling it). That covers every phase
after the TCP connect (bounded by the connect timeout): a proxy's CONNECT answer, the TLS
handshake, the request and the response, directly or through an HTTP(S) proxy
(`HTTPS_PROXY` with `trust_env`, or `session.proxies`). SOCKS proxies are refused with a
message: their connections are urllib3's own classes, which this adapter cannot reach.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Iterator
from typing import Any

from requests.adapters import HTTPAdapter
from requests.exceptions import InvalidProxyURL
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.poolmanager import PoolManager

_local = threading.local()


class Watch:
    """The sockets one deadline guards, and whether it fired."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        self.expired = False

    def add(self, sock: socket.socket) -> None:
        # A duplicate descriptor of our own: shutting it down shuts the connection down
        # for every descriptor, and it cannot be reused by an unrelated socket before
        # `close` (the original may be closed and its number reused meanwhile).
        try:
            fd = os.dup(sock.fileno())
        except OSError:  # already closed, or detached by `ssl` (its wrapper is added)
            return
        try:
            dup = socket.socket(fileno=fd)
        except OSError:
            os.close(fd)
            return
        with self._lock:
            self._socks.append(dup)
            if self.expired:
                _shut(dup)

    def fire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._socks:
                _shut(sock)

    def close(self) -> None:
        with self._lock:
            for sock in self._socks:
                sock.close()
            self._socks.clear()


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def _register(sock: socket.socket | None) -> None:
    watch: Watch | None = getattr(_local, "watch", None)
    if watch is not None and sock is not None:
        watch.add(sock)


class DeadlineHTTPConnection(HTTPConnection):
    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        _register(sock)  # before a proxy tunnel or TLS handshake reads from it
        return sock

    def request(self, *args: Any, **kwargs: Any) -> None:
        _register(self.sock)  # a pooled connection, opened before this deadline
        super().request(*args, **kwargs)


class DeadlineHTTPSConnection(HTTPSConnection):
    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        _register(sock)
        return sock

    def request(self, *args: Any, **kwargs: Any) -> None:
        _register(self.sock)
        super().request(*args, **kwargs)


class DeadlineHTTPConnectionPool(HTTPConnectionPool):
    ConnectionCls = DeadlineHTTPConnection


class DeadlineHTTPSConnectionPool(HTTPSConnectionPool):
    ConnectionCls = DeadlineHTTPSConnection


_POOLS = {"http": DeadlineHTTPConnectionPool, "https": DeadlineHTTPSConnectionPool}


class Adapter(HTTPAdapter):
    """An HTTPAdapter whose connections `within` can cut off, direct or through an HTTP(S)
    proxy. Mount it on the session (it keeps the session's TLS, auth and proxy settings:
    those live on the session)."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _POOLS

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> PoolManager:
        if proxy.lower().startswith("socks"):
            # Not echoed: a proxy URL may hold a password.
            raise InvalidProxyURL(
                "a SOCKS proxy is not supported for Prometheus queries (its connections "
                "escape the whole-request deadline): use an http:// or https:// proxy, or "
                "set NO_PROXY for the Prometheus host"
            )
        manager: PoolManager = super().proxy_manager_for(proxy, **proxy_kwargs)
        manager.pool_classes_by_scheme = _POOLS
        return manager


@contextlib.contextmanager
def within(*, seconds: float) -> Iterator[Watch]:
    """Cut off every request this thread starts through an `Adapter` after `seconds`."""
    watch = Watch()
    previous = getattr(_local, "watch", None)
    _local.watch = watch
    timer = threading.Timer(seconds, watch.fire)
    timer.daemon = True
    timer.start()
    try:
        yield watch
    finally:
        timer.cancel()
        _local.watch = previous
        watch.close()
