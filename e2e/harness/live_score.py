"""Score one live policy run (`make bench-live`) from what was recorded: the load
generator's request records, every pod's lifetime, and the scaled object's
`spec.replicas` over time. Pure: no cluster, no clock; every time is a Unix time passed
in. The client-side windows are `userview.windows` (10 s of scheduled arrival; failures
and requests that found no endpoint count as infinitely slow)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from harness import loadgen, userview


@dataclasses.dataclass(frozen=True)
class PodLife:
    """One pod as the run saw it. `warm_from`: from when a request to it counts as warm
    (the operator opened its warm-up gate, or the harness warmed it before the run);
    None: nobody warmed it, so its first `cold_per_pod` requests are cold."""

    name: str
    ip: str | None
    created: float
    ready_at: float | None  # first seen Ready (containers ready AND every gate True)
    warm_from: float | None
    gone_at: float | None  # last seen (it vanished), None: still there at the end


@dataclasses.dataclass(frozen=True)
class ScaleEvent:
    t: float
    from_replicas: int
    to_replicas: int


@dataclasses.dataclass(frozen=True)
class Segment:
    """A named part of the replayed load, as offsets from the replay's start."""

    name: str
    start_s: float
    end_s: float


@dataclasses.dataclass(frozen=True)
class Scoring:
    """How a run is judged: its segments, the load step (offset from the replay's start),
    the client-side P99 target, and how many first requests of an unwarmed pod are cold."""

    segments: Sequence[Segment]
    load_step_s: float
    slo_p99_s: float
    cold_per_pod: int


@dataclasses.dataclass(frozen=True)
class LiveReport:
    policy: str
    requests: int
    ok: int
    failed: int  # error or timeout
    no_endpoint: int
    windows: int
    windows_met: int
    slo_attainment_windows: float  # windows whose client P99 met the SLO / windows
    slo_attainment_requests: float  # requests answered within the SLO / requests
    windows_met_by_segment: dict[str, tuple[int, int]]  # segment -> (met, windows)
    replica_seconds: float
    cold_requests: int
    scale_events: int
    scale_timeline: list[tuple[float, int, int]]  # (s from the replay start, from, to)
    first_scale_up_s: float | None  # load step -> spec.replicas first rose
    first_added_ready_s: float | None  # load step -> a pod created after it was Ready
    max_replicas: int
    duration_s: float

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def replica_seconds(pods: Sequence[PodLife], *, start: float, end: float) -> float:
    """Seconds each pod existed inside [start, end], summed: starting, warming, serving
    and terminating pods all hold their GPU."""
    if end < start:
        raise ValueError(f"run ends ({end}) before it starts ({start})")
    total = 0.0
    for p in pods:
        lo, hi = max(start, p.created), min(end, p.gone_at if p.gone_at is not None else end)
        total += max(0.0, hi - lo)
    return total


def scale_events(
    replicas: Sequence[tuple[float, int]], *, start: float, end: float
) -> list[ScaleEvent]:
    """Every change of the sampled `spec.replicas` inside [start, end]."""
    out = []
    inside = [(t, n) for t, n in replicas if start <= t <= end]
    before = [n for t, n in replicas if t < start]
    previous = before[-1] if before else (inside[0][1] if inside else None)
    for t, n in inside:
        if previous is not None and n != previous:
            out.append(ScaleEvent(t=t, from_replicas=previous, to_replicas=n))
        previous = n
    return out


def _owner(pods: Sequence[PodLife], record: loadgen.RequestRecord) -> PodLife | None:
    # A pod IP can be reused after a scale-down: the newest pod with that IP created
    # before the request was sent (creation times are whole seconds, hence the 1 s).
    owners = [p for p in pods if p.ip == record.pod_ip and p.created <= record.sent_at + 1.0]
    return max(owners, key=lambda p: p.created) if owners else None


def cold_requests(
    records: Sequence[loadgen.RequestRecord], pods: Sequence[PodLife], *, cold_per_pod: int
) -> list[loadgen.RequestRecord]:
    """Requests that reached a cold pod: sent before the pod's `warm_from`, or, for a pod
    nobody warmed, among the first `cold_per_pod` requests it got (the engine's first
    requests after load are the slow ones); a request to an unknown pod counts as cold."""
    cold = []
    served_so_far: dict[str, int] = {}
    for r in sorted(records, key=lambda r: r.sent_at):
        if r.pod_ip is None:
            continue
        pod = _owner(pods, r)
        if pod is None:
            cold.append(r)
            continue
        if pod.warm_from is not None:
            if r.sent_at < pod.warm_from:
                cold.append(r)
            continue
        seen = served_so_far.get(pod.name, 0)
        served_so_far[pod.name] = seen + 1
        if seen < cold_per_pod:
            cold.append(r)
    return cold


def score(
    *,
    policy: str,
    result: loadgen.ReplayResult,
    pods: Sequence[PodLife],
    replicas: Sequence[tuple[float, int]],
    scoring: Scoring,
) -> LiveReport:
    """The report of one run: `result` from the replay, `pods` and `replicas` sampled
    while it ran."""
    started, ended = result.started_at, result.finished_at
    records, slo = result.records, scoring.slo_p99_s
    windows = userview.windows(records, started)
    met = [w for w in windows if w.p99_s <= slo]
    by_segment: dict[str, tuple[int, int]] = {}
    for seg in scoring.segments:
        inside = [w for w in windows if seg.start_s <= w.start - started < seg.end_s]
        by_segment[seg.name] = (sum(w.p99_s <= slo for w in inside), len(inside))
    within = sum(userview.user_latency(r, started) <= slo for r in records)
    summary = result.summary()
    events = scale_events(replicas, start=started, end=ended)
    step = started + scoring.load_step_s
    at_step = [n for t, n in replicas if t <= step]
    base = at_step[-1] if at_step else (replicas[0][1] if replicas else 0)
    up = next((t for t, n in replicas if t > step and n > base), None)
    added = [p.ready_at for p in pods if p.created >= step - 1.0 and p.ready_at is not None]
    inside_replicas = [n for t, n in replicas if started <= t <= ended]
    cold = cold_requests(records, pods, cold_per_pod=scoring.cold_per_pod)
    return LiveReport(
        policy=policy,
        requests=summary.count,
        windows=len(windows),
        ok=summary.ok,
        windows_met=len(met),
        failed=summary.errors,
        slo_attainment_windows=len(met) / len(windows) if windows else math.nan,
        no_endpoint=summary.no_endpoint,
        slo_attainment_requests=within / len(records) if records else math.nan,
        windows_met_by_segment=by_segment,
        replica_seconds=replica_seconds(pods, start=started, end=ended),
        cold_requests=len(cold),
        scale_events=len(events),
        scale_timeline=[(e.t - started, e.from_replicas, e.to_replicas) for e in events],
        first_scale_up_s=None if up is None else up - step,
        first_added_ready_s=min(added) - step if added else None,
        max_replicas=max(inside_replicas, default=base),
        duration_s=ended - started,
    )
