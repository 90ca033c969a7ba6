"""The operator's own metrics (Prometheus format on --metrics-port), all in one place:
the scaling loop's, the Prometheus batcher's and the warm-up's."""

from __future__ import annotations

import collections
import gc
import logging
import os
import threading
import time
import tracemalloc

from prometheus_client import Counter, Gauge, Histogram

# Every per-ModelDeployment series carries these labels.
PER_DEPLOYMENT = ("namespace", "modeldeployment")


def _per_deployment_gauge(name: str, documentation: str) -> Gauge:
    return Gauge(name, documentation, list(PER_DEPLOYMENT))


DECISIONS = Counter(
    "modelscale_autoscaler_decisions",
    "Autoscaler recommendations by reason",
    ["reason"],
)
SCALE_EVENTS = Counter(
    "modelscale_autoscaler_scale_events",
    "Replica changes the autoscaler applied",
    [*PER_DEPLOYMENT, "direction"],
)
DESIRED = _per_deployment_gauge(
    "modelscale_autoscaler_recommended_replicas", "Replicas the policy recommends"
)
FORECAST_TOKEN_RATE = _per_deployment_gauge(
    "modelscale_autoscaler_forecast_token_rate", "Forecast output tokens/s at the horizon"
)
CURRENT_TOKEN_RATE = _per_deployment_gauge(
    "modelscale_autoscaler_current_token_rate", "Observed output tokens/s"
)
HORIZON = _per_deployment_gauge("modelscale_autoscaler_horizon_seconds", "Forecast horizon in use")
LOOP_SECONDS = Histogram(
    "modelscale_autoscaler_loop_duration_seconds",
    "Wall time of one scaling pass over all ModelDeployments",
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
LAST_PASS_SECONDS = Gauge(
    "modelscale_autoscaler_last_pass_duration_seconds",
    "Wall time of the last scaling pass (the histogram's buckets are too coarse for p99)",
)
LOOP_CPU_SECONDS = Counter(
    "modelscale_autoscaler_loop_cpu_seconds",
    "CPU time spent in scaling passes (thread time)",
)
LAST_PASS = Gauge(
    "modelscale_autoscaler_last_pass_timestamp_seconds",
    "Unix time the last scaling pass completed (the liveness probe fails when it is old)",
)
UNFINISHED = Counter(
    "modelscale_autoscaler_unfinished",
    "ModelDeployments a scaling pass did not finish by its deadline, by stage "
    "(metrics: Prometheus did not answer in time; act: no time left to write)",
    [*PER_DEPLOYMENT, "stage"],
)
METRICS_PROBLEMS = _per_deployment_gauge(
    "modelscale_autoscaler_metrics_problems",
    "Series refused or overrides failed for this ModelDeployment in the last pass",
)
MODELDEPLOYMENTS = Gauge(
    "modelscale_autoscaler_modeldeployments", "ModelDeployments seen by the last pass"
)
STATUS_WRITES = Counter(
    "modelscale_status_writes", "ModelDeployment status patches sent (scaling and reconcile)"
)
STATUS_WRITES_SKIPPED = Counter(
    "modelscale_status_writes_skipped",
    "ModelDeployment status patches not sent because they would not change the status",
)
STATUS_CONFLICTS = Counter(
    "modelscale_status_write_conflicts",
    "ModelDeployment status patches refused (409) because the object had changed since "
    "it was read (re-read and rebuilt), or, on the content-guarded last try, because "
    "another writer had changed the conditions; by who wrote: scaling or reconcile",
    ["writer"],
)
KUBE_REQUESTS = Counter(
    "modelscale_kube_requests",
    "Kubernetes API requests the operator's own client sent, by the apiserver's verb and "
    "resource (kopf's watches, its patches and events are not counted here)",
    ["verb", "resource"],
)
KUBE_THROTTLED_SECONDS = Counter(
    "modelscale_kube_throttled_seconds",
    "Seconds the operator's own client waited for the client-side rate limit (--kube-qps)",
)
ASYNCIO_TASKS = Gauge(
    "modelscale_asyncio_tasks", "asyncio tasks alive on the operator's event loop (kopf's too)"
)
THREADS = Gauge("modelscale_threads", "Python threads alive in the operator process")
QUERIES = Counter("modelscale_prometheus_queries", "Prometheus queries issued")
QUERY_ERRORS = Counter("modelscale_prometheus_query_errors", "Prometheus queries that failed")

# --------------------------------------------------------------------------- warm-up

_START_BUCKETS = (1, 2, 5, 10, 20, 30, 45, 60, 90, 120, 180, 300, 600, 1200, 1800, 3600)
SECONDS_TO_WARM = Histogram(
    "modelscale_pod_seconds_to_warm",
    "Pod creation to warmed (containers ready plus warm-up)",
    list(PER_DEPLOYMENT),
    buckets=_START_BUCKETS,
)
SECONDS_TO_READY = Histogram(
    "modelscale_pod_seconds_to_ready",
    "Pod creation to containers ready (scheduling, image, model load)",
    list(PER_DEPLOYMENT),
    buckets=_START_BUCKETS,
)
WARMUP_DURATION = Histogram(
    "modelscale_warmup_duration_seconds",
    "Wall time of one warm-up attempt",
    list(PER_DEPLOYMENT),
    buckets=(0.1, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600),
)
WARMUPS = Counter(
    "modelscale_warmups",
    "Warm-up attempts by outcome reason (WarmedUp, WarmUpFailed, ModelNotReady, ...)",
    [*PER_DEPLOYMENT, "reason"],
)
PODS_REPLACED = Counter(
    "modelscale_warmup_pods_replaced",
    "Pods deleted after failing warm-up maxAttempts times",
    list(PER_DEPLOYMENT),
)
IN_FLIGHT = Gauge("modelscale_warmups_in_flight", "Warm-ups running or waiting for a slot")


# ------------------------------------------------------------------------ liveness

# A pass older than this many scaling intervals means the loop is stuck: /healthz fails
# and the kubelet restarts the operator. Every call in a pass has a deadline, and the pass
# itself stops acting after two intervals (loops.scaling), so a healthy loop stays under.
STALE_AFTER_INTERVALS = 3.0


class Heartbeat:
    """When the scaling loop last completed a pass (time.monotonic)."""

    def __init__(self, *, started: float) -> None:
        self._lock = threading.Lock()
        self._last = started

    def beat(self, *, now: float) -> None:
        with self._lock:
            self._last = now
        LAST_PASS.set(time.time())

    def stale(self, *, now: float, interval: float) -> str | None:
        """Why the loop counts as stuck, or None when it is alive."""
        with self._lock:
            age = now - self._last
        limit = STALE_AFTER_INTERVALS * interval
        if age > limit:
            return (
                f"the last scaling pass completed {age:.0f} s ago "
                f"(more than {STALE_AFTER_INTERVALS:g} intervals of {interval:g} s)"
            )
        return None


SCALING_LOOP = Heartbeat(started=time.monotonic())


LEADER = Gauge(
    "modelscale_leader",
    "1 while this replica holds the leader Lease (it acts), 0 while it follows",
)


# --------------------------------------------------------------- deleted ModelDeployments

PER_DEPLOYMENT_METRICS: tuple[Counter | Gauge | Histogram, ...] = (
    SCALE_EVENTS,
    DESIRED,
    FORECAST_TOKEN_RATE,
    CURRENT_TOKEN_RATE,
    HORIZON,
    UNFINISHED,
    METRICS_PROBLEMS,
    SECONDS_TO_WARM,
    SECONDS_TO_READY,
    WARMUP_DURATION,
    WARMUPS,
    PODS_REPLACED,
)


def forget(*, namespace: str, name: str) -> int:
    """Remove every series of the ModelDeployment `namespace/name` (it was deleted);
    returns how many label sets went. Found through `collect()` (public in every
    prometheus_client the package allows; `remove_by_labels` is newer)."""
    removed = 0
    for metric in PER_DEPLOYMENT_METRICS:
        labelnames = metric._labelnames
        found: set[tuple[str, ...]] = set()
        for family in metric.collect():
            for sample in family.samples:
                labels = sample.labels
                if labels.get("namespace") == namespace and labels.get("modeldeployment") == name:
                    found.add(tuple(labels[n] for n in labelnames))
        for values in found:
            metric.remove(*values)
            removed += 1
    return removed


# --------------------------------------------------------------------------- memory

MEMORY_REPORT_ENV = "MODELSCALE_MEMORY_REPORT_SECONDS"


def memory_report(*, top: int = 15) -> str:
    """Where the heap goes, for `make bench-scale`: the largest allocation sites when
    tracemalloc traces (PYTHONTRACEMALLOC=N in the environment) and the most numerous
    object types."""
    lines = []
    if tracemalloc.is_tracing():
        current, peak = tracemalloc.get_traced_memory()
        lines.append(f"traced {current / 2**20:.1f} MiB (peak {peak / 2**20:.1f} MiB)")
        stats = tracemalloc.take_snapshot().statistics("lineno")
        lines += [f"  {s.size / 2**20:8.2f} MiB {s.count:8d} {s.traceback}" for s in stats[:top]]
    counts = collections.Counter(type(o).__name__ for o in gc.get_objects())
    lines += [f"  {n:9d} {name}" for name, n in counts.most_common(top)]
    return "\n".join(lines)


def start_memory_reports() -> None:
    """Log `memory_report` every MODELSCALE_MEMORY_REPORT_SECONDS (unset: never)."""
    raw = os.environ.get(MEMORY_REPORT_ENV) or "0"
    try:
        every = float(raw)
    except ValueError:
        raise SystemExit(f"{MEMORY_REPORT_ENV}={raw!r}: give seconds between reports") from None
    if every <= 0:
        return
    log = logging.getLogger("modelscale.memory")

    def run() -> None:
        while True:
            time.sleep(every)
            log.warning("memory report:\n%s", memory_report())

    threading.Thread(target=run, name="memory-report", daemon=True).start()
