"""Where the pod runtime keeps its state, and the timestamps it writes into the API."""

from __future__ import annotations

import datetime as dt

from harness import topology as topo

PODS = topo.STATE / "pods"
POD_LOGS = topo.STATE / "logs" / "pods"
CERTS = topo.STATE / "certs"
COMPONENT = "modelscale-harness-kubelet"


def now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
