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

While the `within` block runs, every connection that starts a request from this thread
registers itself; at the deadline a timer shuts those sockets down, which wakes the
blocked `recv` at once (urllib3 then drops the connection instead of pooling it).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

_local = threading.local()


class Watch:
    """The connections one deadline guards, and whether it fired."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conns: list[HTTPConnection] = []
        self.expired = False

    def add(self, conn: HTTPConnection) -> None:
        with self._lock:
            if self.expired:
                _shut(conn)
            else:
                self._conns.append(conn)

    def fire(self) -> None:
        with self._lock:
            self.expired = True
            for conn in self._conns:
                _shut(conn)


def _shut(conn: HTTPConnection) -> None:
    sock = conn.sock
    if sock is None:
        return
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def _register(conn: HTTPConnection) -> None:
    watch: Watch | None = getattr(_local, "watch", None)
    if watch is not None:
        watch.add(conn)


class DeadlineHTTPConnection(HTTPConnection):
    def request(self, *args: Any, **kwargs: Any) -> None:
        _register(self)
        super().request(*args, **kwargs)


class DeadlineHTTPSConnection(HTTPSConnection):
    def request(self, *args: Any, **kwargs: Any) -> None:
        _register(self)
        super().request(*args, **kwargs)


class DeadlineHTTPConnectionPool(HTTPConnectionPool):
    ConnectionCls = DeadlineHTTPConnection


class DeadlineHTTPSConnectionPool(HTTPSConnectionPool):
    ConnectionCls = DeadlineHTTPSConnection


class Adapter(HTTPAdapter):
    """An HTTPAdapter whose connections `within` can cut off. Mount it on the session
    (it keeps the session's TLS, auth and proxy settings: those live on the session)."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {
            "http": DeadlineHTTPConnectionPool,
            "https": DeadlineHTTPSConnectionPool,
        }


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
