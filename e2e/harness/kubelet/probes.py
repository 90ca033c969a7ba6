"""The pod's startup, readiness and liveness probes: thresholds and one probe run."""

from __future__ import annotations

import dataclasses
import http.client
import socket
import ssl
from typing import Any


@dataclasses.dataclass
class Prober:
    kind: str  # startup | readiness | liveness
    spec: dict[str, Any]
    result: bool
    successes: int = 0
    failures: int = 0
    next_at: float = 0.0
    warned: bool = False

    @classmethod
    def make(cls, kind: str, spec: dict[str, Any], *, started_at: float) -> Prober:
        return cls(
            kind=kind,
            spec=spec,
            result=kind == "liveness",
            next_at=started_at + float(spec.get("initialDelaySeconds", 0)),
        )

    @property
    def period(self) -> float:
        return float(self.spec.get("periodSeconds", 10))

    def record(self, ok: bool) -> bool:
        """Apply one probe outcome with the thresholds; returns the (new) result."""
        if ok:
            self.successes += 1
            self.failures = 0
            threshold = int(self.spec.get("successThreshold", 1))
            if self.successes >= threshold:
                self.result = True
        else:
            self.failures += 1
            self.successes = 0
            if self.failures >= int(self.spec.get("failureThreshold", 3)):
                self.result = False
        return self.result


def run_probe(spec: dict[str, Any], *, pod_ip: str, ports: dict[str, int]) -> tuple[bool, str]:
    timeout = float(spec.get("timeoutSeconds", 1))

    def port_of(p: int | str) -> int:
        if isinstance(p, int) or str(p).isdigit():
            return int(p)
        if p not in ports:
            raise ValueError(f"named port {p!r} not in the container's ports")
        return ports[p]

    try:
        if "httpGet" in spec:
            h = spec["httpGet"]
            host = h.get("host") or pod_ip
            port = port_of(h.get("port", 80))
            conn: http.client.HTTPConnection
            if h.get("scheme", "HTTP").upper() == "HTTPS":
                ctx = ssl._create_unverified_context()  # the kubelet does not verify either
                conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=ctx)
            else:
                conn = http.client.HTTPConnection(host, port, timeout=timeout)
            try:
                headers = {x["name"]: x["value"] for x in h.get("httpHeaders") or []}
                conn.request("GET", h.get("path") or "/", headers=headers)
                status = conn.getresponse().status
            finally:
                conn.close()
            return 200 <= status < 400, f"HTTP probe failed with statuscode: {status}"
        if "tcpSocket" in spec:
            t = spec["tcpSocket"]
            with socket.create_connection(
                (t.get("host") or pod_ip, port_of(t["port"])), timeout=timeout
            ):
                return True, ""
        kind = next((k for k in ("exec", "grpc") if k in spec), "unknown")
        return False, f"{kind} probes are not supported by the harness pod runtime"
    except (OSError, ValueError, http.client.HTTPException) as err:
        return False, f"probe failed: {err}"
