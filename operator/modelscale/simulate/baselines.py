"""Peers' autoscalers, re-implemented from their source code and defaults.

Each class cites the upstream file and function it follows (docs/peers.md has the versions
and every deviation). None of them has a warm-up gate: a pod gets traffic as soon as its
container's readiness probe passes (after startup L) and serves cold until its warm-up W
is over. What a peer reads is a `Metric`: a function of the simulator's `View` returning
the *sum over the pods that report it* of one per-pod series, as Prometheus (or the
pods' own /metrics endpoints) would show it. Per-pod averages are taken by the peer, the
way its upstream code takes them.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from modelscale.simulate.engine import View

Metric = Callable[[View], float]


# ------------------------------------------------------------------------------- metrics


def output_token_rate(view: View) -> float:
    """sum(rate(vllm:generation_tokens_total[1m])): output tokens/s over all pods."""
    return view.token_rate()


def output_token_rate_10s(view: View) -> float:
    """Output tokens/s over the last 10 s: what a pod's own throughput gauge shows when it
    is read directly (AIBrix fetches each pod's /metrics endpoint at its 10 s resync)."""
    return view.token_rate(window_s=10.0)


def _gauge_total(view: View, name: str) -> float | None:
    """Sum over the scraped pods of the View's per-pod gauge `name`, when the View has it
    (a `PodMetric` with `.total`, or a plain number); None when it does not."""
    method = getattr(view, name, None)
    if not callable(method):
        return None
    value = method()
    total = getattr(value, "total", value)
    return float(total)


def _running(view: View) -> float:
    total = _gauge_total(view, "running_requests")
    if total is not None:
        return total
    # Fallback for a View without pod gauges: everything in flight minus the queue.
    return max(0.0, view.concurrency(window_s=view._e.dt) - view.queue_depth)


def _waiting(view: View) -> float:
    total = _gauge_total(view, "waiting_requests")
    return float(view.queue_depth) if total is None else total


def running_requests(view: View) -> float:
    """sum(vllm:num_requests_running): sequences in the pods' running batches."""
    return _running(view)


def waiting_requests(view: View) -> float:
    """sum(vllm:num_requests_waiting): requests queued for a batch slot."""
    return _waiting(view)


def in_flight_requests(view: View) -> float:
    """sum(vllm:num_requests_running + vllm:num_requests_waiting)."""
    return _running(view) + _waiting(view)


def kv_cache_usage_sum(*, fallback_per_running: float) -> Metric:
    """sum over pods of vllm:kv_cache_usage_perc (a 0..1 fraction per pod; AIBrix calls it
    gpu_cache_usage_perc). On a View without KV gauges it is estimated as
    `fallback_per_running` x running sequences (the load test's KV use per sequence)."""

    def metric(view: View) -> float:
        total = _gauge_total(view, "kv_cache_usage")
        return fallback_per_running * _running(view) if total is None else total

    return metric


# ------------------------------------------------------------------------------- HPA


@dataclass
class _HpaBehavior:
    """The HPA v2 controller's post-processing of a raw recommendation (Kubernetes 1.34,
    pkg/controller/podautoscaler/horizontal.go: `stabilizeRecommendationWithBehaviors`,
    `convertDesiredReplicasWithBehaviorRate`, with the default `behavior` of
    pkg/apis/autoscaling/v2/defaults.go): scale-up stabilisation window 0 s, scale-down
    window 300 s (the highest recommendation of the last 300 s wins); scale-up limited to
    max(+4 pods, +100 %) per 15 s period, scale-down to -100 % per 15 s."""

    down_window_s: float = 300.0
    up_window_s: float = 0.0
    history: deque[tuple[float, int]] = field(default_factory=deque)

    def apply(self, *, now: float, raw: int, current: int) -> int:
        if not self.history:
            # An HPA that has been running at `current` recommended `current` before.
            self.history.append((now - 1e-6, current))
        self.history.append((now, raw))
        horizon = max(self.down_window_s, self.up_window_s)
        while self.history and self.history[0][0] < now - horizon:
            self.history.popleft()
        up = min((r for t, r in self.history if t > now - self.up_window_s), default=raw)
        down = max((r for t, r in self.history if t > now - self.down_window_s), default=raw)
        up, down = min(up, raw), max(down, raw)
        rec = current
        rec = max(rec, up)
        rec = min(rec, down)
        up_limit = max(current + 4, current * 2)
        return max(1, min(rec, up_limit))


class _HpaDriven:
    """What the HPA and KEDA (which feeds an HPA) share: a 15 s sync, a per-pod target,
    a metric, the HPA's tolerance and the HPA behaviour; `target_label` names the target
    in the error for a bad one."""

    interval_s = 15.0
    warmup_gate = False
    target_label = "target"
    default_name = "hpa-driven"

    def __init__(
        self,
        *,
        target_per_pod: float,
        metric: Metric = output_token_rate,
        tolerance: float = 0.1,
        name: str | None = None,
    ) -> None:
        name = self.default_name if name is None else name
        if target_per_pod <= 0:
            raise ValueError(f"{name}: {self.target_label} must be > 0, got {target_per_pod}")
        self.name = name
        self.target = target_per_pod
        self.metric = metric
        self.tolerance = tolerance
        self.behavior = _HpaBehavior()


class Hpa(_HpaDriven):
    """Kubernetes HorizontalPodAutoscaler (autoscaling/v2, Kubernetes 1.34) on a Pods
    metric served by prometheus-adapter from the same Prometheus: by default output
    tokens/s per pod; `metric` chooses another per-pod series (e.g. running requests).

    Replica calculator (pkg/controller/podautoscaler/replica_calculator.go,
    `calcPlainMetricReplicas` and `groupPods`): 15 s sync; tolerance 0.1 both ways; the
    average is over pods that have a metric. A pod still loading its model (before L) is
    not yet an endpoint, so it has no metric: it is *missing*, counted at 0 when scaling up
    and at the target when scaling down, and a recommendation that flips direction
    through them, or whose pod count does, is dropped. For a non-CPU metric readiness is
    not checked, so a pod past L counts with its (cold) metric. Then `_HpaBehavior`.
    """

    target_label = "target per pod"
    default_name = "hpa"

    def raw_recommendation(self, *, total: float, current: int, with_metric: int) -> int:
        if with_metric == 0:
            return current  # "did not receive metrics for targeted pods": no change
        ratio = total / with_metric / self.target
        missing = max(0, current - with_metric)
        if missing == 0:
            if abs(1.0 - ratio) <= self.tolerance:
                return current
            return math.ceil(ratio * with_metric)
        pods = with_metric + missing
        filled = total + (missing * self.target if ratio < 1.0 else 0.0)
        new_ratio = filled / pods / self.target
        if (
            abs(1.0 - new_ratio) <= self.tolerance
            or (ratio < 1.0 < new_ratio)
            or (ratio > 1.0 > new_ratio)
        ):
            return current
        new = math.ceil(new_ratio * pods)
        if (new_ratio < 1.0 and new > current) or (new_ratio > 1.0 and new < current):
            return current  # the pod count, not the usage, would flip the direction
        return new

    def decide(self, view: View) -> int:
        current = view.created
        raw = self.raw_recommendation(
            total=self.metric(view), current=current, with_metric=view.container_ready
        )
        return self.behavior.apply(now=view.now, raw=raw, current=current)


# ------------------------------------------------------------------------------- KEDA


class Keda(_HpaDriven):
    """KEDA 2.x Prometheus scaler feeding an HPA External metric of type AverageValue
    (KEDA's default metric type for the Prometheus trigger).

    The HPA asks KEDA's metrics server at each 15 s sync, and KEDA answers with a fresh
    Prometheus query: `useCachedMetrics` defaults to false, and then
    pkg/scaling/scale_handler.go (`GetScaledObjectMetrics`) calls the scaler directly
    instead of reading the value its `pollingInterval` loop cached (kedacore/keda main,
    2.21 development line). The polling interval only drives activation (0 <-> 1), which
    we never use (min 1). `metric` is the query's value: by default
    `sum(rate(output tokens[1m]))`.

    The HPA then runs `GetExternalPerPodMetricReplicas` (replica_calculator.go): usage
    ratio = value / (target x status.replicas), where status.replicas counts pods still
    loading; if |1 - ratio| > 0.1 the recommendation is ceil(value / target), else
    unchanged. Then the same HPA behaviour as `Hpa`.
    """

    target_label = "threshold"
    default_name = "keda"

    def decide(self, view: View) -> int:
        raw = self.raw_recommendation(value=self.metric(view), status_replicas=view.created)
        return self.behavior.apply(now=view.now, raw=raw, current=view.created)

    def raw_recommendation(self, *, value: float, status_replicas: int) -> int:
        replicas = max(1, status_replicas)
        ratio = value / (self.target * replicas)
        if abs(1.0 - ratio) <= self.tolerance:
            return replicas
        return max(1, math.ceil(value / self.target))


# ------------------------------------------------------------------------------- Knative


class KnativeKpa:
    """Knative Serving KPA (knative/serving main after v1.23,
    pkg/autoscaler/scaling/autoscaler.go: `newAutoscaler` and `Scale`) on concurrency,
    its native metric: in-flight requests per pod as the queue-proxies (and the
    activator, for requests queued in front of the pods) report them each second.

    Every 2 s (tick interval): stable average over 60 s, panic average over 6 s (10 %);
    per-pod target = container-concurrency target x target utilisation 0.7.
    desired = ceil(average / target), bounded by max scale-up rate 1000 x ready pods and
    max scale-down rate 2 (no lower than ready / 2). Panic starts when the panic desired
    count / ready pods >= 2.0, and each tick still over the threshold moves the panic
    time to now; while panicking the count never goes down; panic ends once the panic
    time is more than 60 s old and the tick is not over the threshold. Ready pods are
    those whose container passed its probe (at least 1).

    A fresh autoscaler (`newAutoscaler`) starts *in panic mode* when more than one pod is
    ready, holding at least that many ("we lose metric history on restart, keep at least
    the current scale until we accumulate enough data"). The simulator's replay is such
    a start: metric history begins at `started_at` (the replay's t = 0), so the first
    decision comes in panic mode with max panic pods = the ready count.
    """

    interval_s = 2.0
    warmup_gate = False

    def __init__(
        self,
        *,
        target_concurrency: float,
        utilization: float = 0.7,
        stable_window_s: float = 60.0,
        panic_window_pct: float = 10.0,
        panic_threshold: float = 2.0,
        max_scale_up_rate: float = 1000.0,
        max_scale_down_rate: float = 2.0,
        started_at: float = 0.0,
        name: str = "knative-kpa",
    ) -> None:
        if target_concurrency <= 0:
            raise ValueError(f"{name}: target concurrency must be > 0, got {target_concurrency}")
        self.name = name
        self.target = target_concurrency * utilization
        self.stable_window_s = stable_window_s
        self.panic_window_s = stable_window_s * panic_window_pct / 100.0
        self.panic_threshold = panic_threshold
        self.max_up = max_scale_up_rate
        self.max_down = max_scale_down_rate
        self.started_at = started_at
        self._created = False
        self.panic_time: float | None = None
        self.max_panic_pods = 0

    @property
    def panicking(self) -> bool:
        return self.panic_time is not None

    def _create(self, ready: int) -> None:
        """`newAutoscaler`: panic from the start if more than one pod is ready."""
        self._created = True
        if ready > 1:
            self.panic_time = self.started_at
        self.max_panic_pods = ready

    def decide(self, view: View) -> int:
        if not self._created:
            self._create(view.container_ready)
        ready = max(1, view.container_ready)
        stable = view.concurrency(window_s=self.stable_window_s)
        panic = view.concurrency(window_s=self.panic_window_s)
        max_up = math.ceil(self.max_up * ready)
        max_down = math.floor(ready / self.max_down) if self.max_down > 0 else 0
        dspc = math.ceil(stable / self.target)
        dppc = math.ceil(panic / self.target)
        desired_stable = min(max(dspc, max_down), max_up)
        desired_panic = min(max(dppc, max_down), max_up)
        over = dppc / ready >= self.panic_threshold
        if over:
            self.panic_time = view.now  # begin panicking, or extend the panic
        elif self.panic_time is not None and self.panic_time + self.stable_window_s < view.now:
            self.panic_time = None
            self.max_panic_pods = 0
        desired = desired_stable
        if self.panic_time is not None:
            # Provision for the larger of the two windows; never lower while panicking.
            desired = max(desired, desired_panic)
            self.max_panic_pods = max(self.max_panic_pods, desired)
            desired = self.max_panic_pods
        return max(1, desired)


# ------------------------------------------------------------------------------- AIBrix


class AibrixApa:
    """AIBrix APA (vllm-project/aibrix main at e3e10f9, v0.7.0+156, Aug 2026).

    Every 10 s (`DefaultResyncInterval`, pkg/controller/podautoscaler/
    podautoscaler_controller.go) the controller reads each pod's metric from the pod's
    own /metrics endpoint (metrics/collector.go `collectFromPods`, over every pod of the
    selector; metrics/fetcher.go `fetchFromPod` returns 0.0, not an error, for a pod with
    an IP that does not answer, so a pod still loading its model counts as 0; only a pod
    without an IP is skipped, and in the replay every created pod has one), records their
    mean into a 180 s stable window
    (metrics/client.go: `DefaultStableWindowDuration`; `UpdateMetrics` records the
    per-snapshot mean, `GetMetricValue` averages the window) and runs
    `computeTargetReplicas` (algorithm/apa.go) on that average: if use/target > 1 + 0.1,
    ceil(current x use/target) capped at ceil(2 x current); if < 1 - 0.1, the same formula
    floored at floor(current / 2); else unchanged. The controller then applies
    `stabilizeRecommendation`: every recommendation is kept for the larger of the
    scale-up (0 s) and scale-down (300 s) windows; a scale-up takes the *highest*
    recommendation of the scale-up window, a scale-down the *lowest* of the 300 s
    scale-down window (so it does not delay a scale-down; it repeats the lowest recent
    one), and no change returns the current count. There is no pending-replica guard in
    AIBrix's history; the zeros of the pods still starting are what keep a resync from
    multiplying an already-raised count by the same high ratio again.
    """

    interval_s = 10.0
    warmup_gate = False

    def __init__(
        self,
        *,
        target_per_pod: float,
        metric: Metric = output_token_rate_10s,
        up_tolerance: float = 0.1,
        down_tolerance: float = 0.1,
        max_scale_up_rate: float = 2.0,
        max_scale_down_rate: float = 2.0,
        scale_up_window_s: float = 0.0,
        scale_down_window_s: float = 300.0,
        window_s: float = 180.0,
        name: str = "aibrix-apa",
    ) -> None:
        if target_per_pod <= 0:
            raise ValueError(f"{name}: targetValue must be > 0, got {target_per_pod}")
        self.name = name
        self.target = target_per_pod
        self.metric = metric
        self.up_tol, self.down_tol = up_tolerance, down_tolerance
        self.up_rate, self.down_rate = max_scale_up_rate, max_scale_down_rate
        self.up_window_s, self.down_window_s = scale_up_window_s, scale_down_window_s
        self.window_s = window_s
        self.samples: deque[tuple[float, float]] = deque()
        self.recommendations: deque[tuple[float, int]] = deque()

    def compute(self, *, current: int, use_per_pod: float) -> int:
        ratio = use_per_pod / self.target
        if ratio > 1.0 + self.up_tol:
            return min(math.ceil(current * ratio), math.ceil(self.up_rate * current))
        if ratio < 1.0 - self.down_tol:
            return max(math.ceil(current * ratio), math.floor(current / self.down_rate))
        return current

    def observe(self, *, now: float, total: float, pods: int) -> float | None:
        """Record one snapshot (mean over the `pods` in it) and return the stable
        window's average, or None when no snapshot is in the window."""
        if pods > 0:
            self.samples.append((now, total / pods))
        while self.samples and self.samples[0][0] < now - self.window_s:
            self.samples.popleft()  # TimeWindow.Record keeps buckets >= now - duration
        if not self.samples:
            return None
        return sum(v for _, v in self.samples) / len(self.samples)

    def stabilize(self, *, now: float, recommendation: int, current: int) -> int:
        self.recommendations.append((now, recommendation))
        horizon = max(self.up_window_s, self.down_window_s)
        while self.recommendations and self.recommendations[0][0] <= now - horizon:
            self.recommendations.popleft()
        if recommendation > current:
            window = [r for t, r in self.recommendations if t > now - self.up_window_s]
            return max(window, default=recommendation)
        if recommendation < current:
            window = [r for t, r in self.recommendations if t > now - self.down_window_s]
            return min(window, default=recommendation)
        return current

    def decide(self, view: View) -> int:
        current = view.created
        # Every created pod is in the snapshot: those not ready yet report 0 (fetcher.go).
        use = self.observe(now=view.now, total=self.metric(view), pods=current)
        if use is None:
            return current
        raw = self.compute(current=current, use_per_pod=use)
        return max(1, self.stabilize(now=view.now, recommendation=raw, current=current))


# ------------------------------------------------------------------------------- static


class StaticPeak:
    """Static allocation: the replicas the trace's peak needs, all the time, pre-warmed."""

    interval_s = 3600.0
    warmup_gate = True

    def __init__(self, *, replicas: int) -> None:
        self.name = "static-peak"
        self.replicas = replicas

    def decide(self, view: View) -> int:
        return self.replicas
