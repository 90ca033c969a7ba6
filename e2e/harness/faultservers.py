"""TCP servers that misbehave in ways the real programs cannot be made to: for the
deadline tests only (everything else is tested against the real server).

    with faultservers.silent() as (host, port): ...      # accepts, never answers
    with faultservers.dribbling(b"HTTP/1.1 200 OK...", every=0.8) as (host, port): ...
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

# Fixed ports for fault servers that stand in for a ModelDeployment's Prometheus: the
# operator's URL allow-list names scheme, host and port, so the e2e install allows these.
FAULT_PROMETHEUS_PORTS = (19391, 19392)


@contextlib.contextmanager
def _serve(handle: object, *, host: str = "127.0.0.1", port: int = 0) -> Iterator[tuple[str, int]]:
    assert callable(handle)
    stop = threading.Event()
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, port))
    listener.listen(64)
    listener.settimeout(0.1)
    conns: list[socket.socket] = []

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conns.append(conn)
            threading.Thread(target=handle, args=(conn, stop), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield host, listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(timeout=2)
        listener.close()
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.close()


def silent(*, host: str = "127.0.0.1") -> contextlib.AbstractContextManager[tuple[str, int]]:
    """Accepts connections and reads what is sent, but never writes a byte (a black-holed
    or hung server, after the TCP handshake)."""

    def handle(conn: socket.socket, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                conn.settimeout(0.2)  # in the try: teardown may have closed it already
                if not conn.recv(65536):
                    return
            except TimeoutError:
                continue
            except OSError:
                return

    return _serve(handle, host=host)


def dribbling(
    answer: bytes, *, every: float, at_once: int = 0, host: str = "127.0.0.1", port: int = 0
) -> contextlib.AbstractContextManager[tuple[str, int]]:
    """Reads the request, sends the first `at_once` bytes of `answer`, then the rest one
    byte every `every` seconds."""

    def handle(conn: socket.socket, stop: threading.Event) -> None:
        try:
            conn.settimeout(5)
            conn.recv(65536)
            conn.sendall(answer[:at_once])
            for i in range(at_once, len(answer)):
                if stop.wait(every):
                    return
                conn.sendall(answer[i : i + 1])
        except OSError:
            return

    return _serve(handle, host=host, port=port)


def http_answer(body: bytes, *, content_type: str = "application/json") -> bytes:
    """A complete HTTP/1.1 200 response carrying `body`."""
    head = (
        f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    return head + body
