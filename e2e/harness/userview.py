"""What the users of a replay saw, per request and per window of scheduled arrivals, and
which requests reached a pod before its warm-up finished: the one definition the
autoscaling e2e test judges and the demo reports."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from harness import loadgen
from modelscale import podfacts

WINDOW_S = 10.0  # client-side P99 window


def user_latency(record: loadgen.RequestRecord, started_at: float) -> float:
    """What the user waited: the answer time plus any client-side wait for a concurrency
    slot (what a user behind a gateway waits); failed requests and requests with no
    endpoint count as infinitely slow."""
    if record.outcome != loadgen.OK or record.latency_s is None:
        return math.inf
    queued = max(0.0, record.sent_at - (started_at + record.scheduled_s))
    return queued + record.latency_s


@dataclasses.dataclass(frozen=True)
class Window:
    """Client-side view of one WINDOW_S of scheduled arrivals."""

    start: float  # Unix time
    requests: int
    offered_tokens_per_s: float  # output tokens asked for (max_tokens), served or not
    output_tokens_per_s: float  # output tokens served
    p99_s: float  # what users waited; failures count as infinitely slow


def windows(records: Sequence[loadgen.RequestRecord], started_at: float) -> list[Window]:
    """One `Window` per WINDOW_S of scheduled arrival that has requests, oldest first."""
    by_window: dict[int, list[loadgen.RequestRecord]] = {}
    for r in records:
        by_window.setdefault(int(r.scheduled_s // WINDOW_S), []).append(r)
    out = []
    for index in sorted(by_window):
        rs = by_window[index]
        lat = [user_latency(r, started_at) for r in rs]
        out.append(
            Window(
                start=started_at + index * WINDOW_S,
                requests=len(rs),
                offered_tokens_per_s=sum(r.max_tokens for r in rs) / WINDOW_S,
                output_tokens_per_s=sum(r.output_tokens for r in rs) / WINDOW_S,
                p99_s=float(np.percentile(lat, 99, method="higher")),
            )
        )
    return out


def warm_time(pod: Mapping[str, Any]) -> float | None:
    """When the operator opened the pod's gate (creation + seconds-to-warm), if it did."""
    facts = podfacts.read(pod)
    if facts.created is None or facts.seconds_to_warm is None:
        return None
    return facts.created + facts.seconds_to_warm


def requests_before_warm_up(
    records: Sequence[loadgen.RequestRecord], pods: Sequence[Mapping[str, Any]]
) -> list[tuple[loadgen.RequestRecord, str]]:
    """Requests sent to a pod before its warm-up finished (or to an unknown pod), each with
    the pod's name ("no known pod" for the latter). A pod IP can be reused after a
    scale-down: a request belongs to the newest pod with that IP created before it was
    sent (creation times are whole seconds, hence the 1 s)."""
    bad = []
    for r in records:
        if r.pod_ip is None:
            continue
        owners = [
            p
            for p in pods
            if (p.get("status") or {}).get("podIP") == r.pod_ip
            and (podfacts.read(p).created or math.inf) <= r.sent_at + 1.0
        ]
        if not owners:
            bad.append((r, "no known pod"))
            continue
        pod = max(owners, key=lambda p: podfacts.read(p).created or 0.0)
        opened = warm_time(pod)
        if opened is None or r.sent_at < opened:
            bad.append((r, str(pod["metadata"]["name"])))
    return bad
