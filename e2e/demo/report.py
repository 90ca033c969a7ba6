"""What the demo shows, computed from what it recorded: the live table's rows, the final
summary and `demo-report.png`. Pure: no cluster, no clock; every time is passed in."""

from __future__ import annotations

import dataclasses
import itertools
import pathlib
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib
import numpy as np

from harness import loadgen
from harness.userview import WINDOW_S, requests_before_warm_up, user_latency, windows
from modelscale.api.v1alpha1 import from_rfc3339


@dataclasses.dataclass(frozen=True)
class Sample:
    """The ModelDeployment and its Deployment at one moment (Unix time `t`)."""

    t: float
    replicas: int  # pods of the Deployment (status.replicas): what the GPUs cost
    desired: int | None
    ready: int
    warmed: int
    current_token_rate: float | None
    predicted_token_rate: float | None
    current_p99_s: float | None
    reason: str
    message: str
    decisions: tuple[tuple[str, int, str], ...]  # (time, replicas, reason)

    @staticmethod
    def from_status(t: float, replicas: int | None, status: Mapping[str, Any]) -> Sample:
        a = status.get("autoscaling") or {}
        return Sample(
            t=t,
            replicas=int(status.get("replicas") or replicas or 0),
            desired=status.get("desiredReplicas"),
            ready=int(status.get("readyReplicas") or 0),
            warmed=int(status.get("warmedReplicas") or 0),
            current_token_rate=a.get("currentTokenRate"),
            predicted_token_rate=a.get("predictedTokenRate"),
            current_p99_s=a.get("currentP99Seconds"),
            reason=str(a.get("reason") or "-"),
            message=str(a.get("message") or ""),
            decisions=tuple(
                (str(d["time"]), int(d["replicas"]), str(d["reason"]))
                for d in a.get("decisions") or []
            ),
        )


def decisions(samples: Sequence[Sample]) -> list[tuple[float, int, str]]:
    """Every decision seen in status.autoscaling.decisions, once, oldest first."""
    seen = {d for s in samples for d in s.decisions}
    return sorted((from_rfc3339(t), n, reason) for t, n, reason in seen)


def cold_requests(
    records: Sequence[loadgen.RequestRecord], pods: Sequence[Mapping[str, Any]]
) -> list[loadgen.RequestRecord]:
    """Requests sent to a pod before its warm-up finished, or to a pod never seen."""
    return [r for r, _ in requests_before_warm_up(records, pods)]


@dataclasses.dataclass(frozen=True)
class Summary:
    requests: int
    ok: int
    failed: int  # errors, timeouts and requests that found no ready endpoint
    windows: int
    windows_within_slo: int
    slo_attainment: float | None  # share of windows whose client P99 met the SLO
    requests_within_slo: float | None  # share of requests answered within the SLO
    slo_p99_s: float
    replica_seconds: float
    peak_replicas: int
    scale_events: int  # changes of status.desiredReplicas
    cold_requests: int
    load_seconds: float

    def lines(self) -> list[str]:
        def pct(x: float | None) -> str:
            return "n/a" if x is None else f"{100 * x:.1f} %"

        return [
            f"load: {self.requests} requests in {self.load_seconds:.0f} s "
            f"({self.ok} ok, {self.failed} failed or without a ready endpoint)",
            f"SLO attainment: {pct(self.slo_attainment)} of {self.windows} "
            f"{WINDOW_S:.0f}-s windows had client P99 <= {self.slo_p99_s:g} s; "
            f"{pct(self.requests_within_slo)} of requests within it",
            f"replica-seconds: {self.replica_seconds:.0f} (peak {self.peak_replicas} replicas)",
            f"scale events: {self.scale_events}",
            f"requests on cold pods: {self.cold_requests}",
        ]


def replica_seconds(samples: Sequence[Sample], *, start: float, end: float) -> float:
    """Integral of the Deployment's pods over [start, end] (step function of the samples)."""
    total = 0.0
    inside = [s for s in samples if s.t <= end]
    for here, nxt in zip(inside, [*inside[1:], None], strict=True):
        lo = max(here.t, start)
        hi = min(nxt.t if nxt is not None else end, end)
        if hi > lo:
            total += here.replicas * (hi - lo)
    return total


def summarize(
    *,
    records: Sequence[loadgen.RequestRecord],
    samples: Sequence[Sample],
    pods: Sequence[Mapping[str, Any]],
    started_at: float,
    finished_at: float,
    slo_p99_s: float,
) -> Summary:
    ws = windows(records, started_at)
    good = [w for w in ws if w.p99_s <= slo_p99_s]
    lat = [user_latency(r, started_at) for r in records]
    within = sum(1 for x in lat if x <= slo_p99_s)
    desired = [s.desired for s in samples if s.desired is not None]
    during = [s for s in samples if started_at <= s.t <= finished_at]
    return Summary(
        requests=len(records),
        ok=sum(1 for r in records if r.outcome == loadgen.OK),
        failed=sum(1 for r in records if r.outcome != loadgen.OK),
        windows=len(ws),
        windows_within_slo=len(good),
        slo_attainment=len(good) / len(ws) if ws else None,
        requests_within_slo=within / len(lat) if lat else None,
        slo_p99_s=slo_p99_s,
        replica_seconds=replica_seconds(samples, start=started_at, end=finished_at),
        peak_replicas=max((s.replicas for s in during), default=0),
        scale_events=sum(1 for a, b in itertools.pairwise(desired) if a != b),
        cold_requests=len(cold_requests(records, pods)),
        load_seconds=finished_at - started_at,
    )


# --------------------------------------------------------------------------- live table


@dataclasses.dataclass(frozen=True)
class Row:
    """One line of the live table."""

    elapsed_s: float
    offered_tokens_per_s: float
    forecast_tokens_per_s: float | None
    desired: int | None
    ready: int
    warmed: int
    client_p99_s: float | None
    reason: str


def live_row(
    *,
    now: float,
    started_at: float,
    records: Sequence[loadgen.RequestRecord],
    sample: Sample,
) -> Row:
    """The last complete WINDOW_S of load as the client saw it, next to the operator's view."""
    lo, hi = now - started_at - WINDOW_S, now - started_at
    recent = [r for r in records if lo <= r.scheduled_s < hi]
    done = [r for r in recent if r.outcome != loadgen.OK or r.latency_s is not None]
    p99 = (
        float(np.percentile([user_latency(r, started_at) for r in done], 99, method="higher"))
        if done
        else None
    )
    return Row(
        elapsed_s=hi,
        offered_tokens_per_s=sum(r.max_tokens for r in recent) / WINDOW_S,
        forecast_tokens_per_s=sample.predicted_token_rate,
        desired=sample.desired,
        ready=sample.ready,
        warmed=sample.warmed,
        client_p99_s=p99,
        reason=sample.reason,
    )


def row_cells(row: Row, *, slo_p99_s: float) -> tuple[str, ...]:
    def num(x: float | None, fmt: str) -> str:
        return "-" if x is None else format(x, fmt)

    p99 = num(row.client_p99_s, ".2f")
    if row.client_p99_s is not None:
        p99 = f"{p99} {'ok' if row.client_p99_s <= slo_p99_s else 'OVER'}"
    return (
        f"{row.elapsed_s:5.0f} s",
        f"{row.offered_tokens_per_s:6.0f}",
        num(row.forecast_tokens_per_s, "6.0f"),
        f"{'-' if row.desired is None else row.desired} / {row.ready} / {row.warmed}",
        p99,
        row.reason,
    )


# Two-line headers keep the table within 80 columns.
COLUMNS = (
    "time",
    "offered\ntok/s",
    "forecast\ntok/s",
    "replicas\ndes/rdy/wrm",
    "P99 (s)\nvs SLO",
    "last\ndecision",
)


# --------------------------------------------------------------------------- figure


def plot(
    path: pathlib.Path,
    *,
    records: Sequence[loadgen.RequestRecord],
    samples: Sequence[Sample],
    started_at: float,
    slo_p99_s: float,
    title: str,
) -> None:
    """Three panels sharing the time axis: load and forecast, replicas, P99 vs the SLO;
    every scaling decision is a dotted line across all three."""
    matplotlib.use("Agg")  # no display needed, also under make and in CI
    from matplotlib import pyplot as plt  # noqa: PLC0415  (after choosing the backend)

    ws = windows(records, started_at)
    t0 = started_at
    fig, (ax_load, ax_rep, ax_lat) = plt.subplots(
        3, 1, figsize=(10, 9), sharex=True, gridspec_kw={"hspace": 0.45}
    )
    fig.suptitle(title)

    wx = [w.start - t0 + WINDOW_S / 2 for w in ws]
    ax_load.plot(wx, [w.offered_tokens_per_s for w in ws], label="offered (client)", lw=2)
    st = [s.t - t0 for s in samples]
    ax_load.plot(
        st, [s.current_token_rate or np.nan for s in samples], label="measured (Prometheus)"
    )
    ax_load.plot(
        st, [s.predicted_token_rate or np.nan for s in samples], "--", label="forecast at horizon"
    )
    ax_load.set_ylabel("output tokens/s")
    ax_load.legend(loc="upper left", fontsize=8)

    ax_rep.step(st, [s.desired or 0 for s in samples], where="post", label="desired", lw=2)
    ax_rep.step(st, [s.replicas for s in samples], where="post", label="pods")
    ax_rep.step(st, [s.warmed for s in samples], where="post", label="warmed", ls=":")
    ax_rep.step(st, [s.ready for s in samples], where="post", label="ready", ls="--")
    ax_rep.set_ylabel("replicas")
    ax_rep.set_ylim(bottom=0)
    ax_rep.legend(loc="lower right", fontsize=8)

    p99 = [min(w.p99_s, 4 * slo_p99_s) for w in ws]  # failures (inf) drawn at the top
    ax_lat.plot(wx, p99, "o-", label=f"client P99 per {WINDOW_S:.0f} s")
    ax_lat.axhline(slo_p99_s, color="red", ls="--", label=f"SLO {slo_p99_s:g} s")
    ax_lat.set_ylabel("seconds")
    ax_lat.set_xlabel("seconds since the load started")
    ax_lat.legend(loc="upper right", fontsize=8)

    for when, replicas, reason in decisions(samples):
        x = when - t0
        if not st or x < st[0]:
            continue
        for ax in (ax_load, ax_rep, ax_lat):
            ax.axvline(x, color="grey", ls=":", lw=0.8)
        ax_rep.annotate(
            f"{replicas} {reason}",
            (x, 1.02),
            xycoords=("data", "axes fraction"),
            fontsize=7,
            rotation=90,
            va="bottom",
            ha="center",
        )
    ax_lat.set_ylim(bottom=0)
    fig.subplots_adjust(top=0.93, bottom=0.07)
    fig.savefig(path, dpi=100)
    plt.close(fig)
