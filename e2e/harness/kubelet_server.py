"""The one kubelet HTTP endpoint the harness serves: container logs, so `kubectl logs` works.

The apiserver proxies `pods/log` to `https://<node InternalIP>:10250/containerLogs/...`
with its kubelet client certificate; this server requires a certificate from the cluster
CA (anyone else gets a TLS error) and serves the container's log file written by the pod
runtime. `exec`, `attach` and `port-forward` are not offered (404).
"""

from __future__ import annotations

import http.server
import pathlib
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable

# Each (re)start of a container appends a line starting with this to its log file.
START_MARKER = "--- "
LogPath = Callable[[str, str, str], pathlib.Path | None]
Alive = Callable[[str, str], bool]


def select_log(text: str, *, previous: bool, tail_lines: int | None) -> str:
    """The current (or previous) run's output from a log file holding every run."""
    runs: list[list[str]] = [[]]
    for line in text.splitlines(keepends=True):
        if line.startswith(START_MARKER) and " start #" in line:
            runs.append([])
            continue
        runs[-1].append(line)
    runs = runs[1:] or runs
    chosen = runs[-2] if previous and len(runs) >= 2 else ([] if previous else runs[-1])
    if tail_lines is not None:
        chosen = chosen[-tail_lines:] if tail_lines > 0 else []
    return "".join(chosen)


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: object) -> None:
        del format, args  # quiet: the runtime's log is for pods

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        parts = url.path.strip("/").split("/")
        if url.path == "/healthz":
            self._send(200, "ok")
            return
        if len(parts) != 4 or parts[0] != "containerLogs":
            self._send(404, f"{url.path}: not served by the harness pod runtime\n")
            return
        _, ns, pod, container = parts
        q = urllib.parse.parse_qs(url.query)
        path = self.server.log_path(ns, pod, container)
        if path is None or not path.exists():
            self._send(404, f"no log for container {container!r} of pod {ns}/{pod}\n")
            return
        tail = int(q["tailLines"][0]) if "tailLines" in q else None
        previous = q.get("previous", ["false"])[0] == "true"
        follow = q.get("follow", ["false"])[0] == "true" and not previous
        with path.open("rb") as fh:
            text = fh.read().decode(errors="replace")
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(select_log(text, previous=previous, tail_lines=tail).encode())
            self.wfile.flush()
            while follow and self.server.alive(ns, pod):
                chunk = fh.read()
                if chunk:
                    self.wfile.write(chunk)
                    self.wfile.flush()
                else:
                    time.sleep(0.2)

    def do_POST(self) -> None:  # exec, attach, port-forward
        self._send(404, "exec/attach/port-forward are not supported by the harness pod runtime\n")

    def _send(self, code: int, body: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body.encode())))
        self.end_headers()
        self.wfile.write(body.encode())


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    log_path: LogPath
    alive: Alive


def serve(
    *,
    addresses: list[str],
    port: int,
    cert: pathlib.Path,
    key: pathlib.Path,
    client_ca: pathlib.Path,
    log_path: LogPath,
    alive: Alive,
) -> list[_Server]:
    """Start one TLS server per address in daemon threads; returns them (for shutdown)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(cert), str(key))
    ctx.load_verify_locations(cafile=str(client_ca))
    ctx.verify_mode = ssl.CERT_REQUIRED
    servers = []
    for address in addresses:
        srv = _Server((address, port), _Handler)
        # Handshake in the handler thread, not in the accept loop.
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True, do_handshake_on_connect=False)
        srv.log_path = log_path
        srv.alive = alive
        threading.Thread(
            target=srv.serve_forever, name=f"kubelet-api-{address}", daemon=True
        ).start()
        servers.append(srv)
    return servers
