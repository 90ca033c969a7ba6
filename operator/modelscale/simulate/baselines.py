"""Peers' autoscalers, re-implemented from their documented algorithms and defaults.

None of them has a warm-up gate: a pod gets traffic as soon as its container's readiness
probe passes (after startup L), and serves cold until its warm-up W is over. The metrics
they read come through the same simulated Prometheus (1 s scrapes, rate over 1 m), except
Knative's, whose queue-proxies report concurrency every second.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from modelscale.simulate.engine import View


@dataclass
class _HpaBehavior:
    """The HPA v2 controller's post-processing of a raw recommendation (Kubernetes 1.34,
    pkg/controller/podautoscaler/horizontal.go, default `behavior`): scale-up stabilisation
    window 0 s, scale-down stabilisation window 300 s (the highest recommendation of the
    last 300 s wins), scale-up limited to max(+4 pods, +100 %) per 15 s period, scale-down
    limited to -100 % per 15 s."""

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


class Hpa:
    """Kubernetes HorizontalPodAutoscaler (autoscaling/v2, Kubernetes 1.34) on a Pods metric:
    output tokens/s per pod, served by prometheus-adapter from the same Prometheus.

    Replica calculator (`calcPlainMetricReplicas`): 15 s sync; tolerance 0.1; the average
    is taken over pods that have a metric. A pod still loading its model (before L) has no
    metric: it is a *missing* pod, counted at 0 when scaling up and at the target when
    scaling down, and a recommendation that flips direction through them is dropped. For a
    non-CPU metric, readiness is not checked (`groupPods`), so a pod past L counts with its
    (cold) metric. Then `_HpaBehavior` (stabilisation and rate limits).
    """

    interval_s = 15.0
    warmup_gate = False

    def __init__(self, *, target_per_pod: float, tolerance: float = 0.1, name: str = "hpa") -> None:
        self.name = name
        self.target = target_per_pod
        self.tolerance = tolerance
        self.behavior = _HpaBehavior()

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
        return math.ceil(new_ratio * pods)

    def decide(self, view: View) -> int:
        current = view.created
        raw = self.raw_recommendation(
            total=view.token_rate(), current=current, with_metric=view.container_ready
        )
        return self.behavior.apply(now=view.now, raw=raw, current=current)


class Keda:
    """KEDA 2.x Prometheus scaler feeding an HPA External metric of type AverageValue.

    KEDA queries Prometheus (`sum(rate(output tokens[1m]))`) every `pollingInterval`
    = 30 s and the HPA reads that value at its 15 s sync. For an AverageValue External
    metric the HPA (`GetExternalPerPodMetricReplicas`) divides by `status.replicas`, which
    counts pods still loading: usage = ceil(value / status.replicas); if |1 - usage/target|
    > 0.1 the recommendation is ceil(value / target), else unchanged. Then the same HPA
    behaviour (300 s scale-down stabilisation, max(+4, +100 %) per 15 s). KEDA's cooldown
    (300 s) only applies to 1 -> 0, which we never do (min 1).
    """

    interval_s = 15.0
    warmup_gate = False

    def __init__(
        self, *, target_per_pod: float, polling_s: float = 30.0, tolerance: float = 0.1
    ) -> None:
        self.name = "keda"
        self.target = target_per_pod
        self.polling_s = polling_s
        self.tolerance = tolerance
        self.behavior = _HpaBehavior()
        self._value = 0.0
        self._polled_at = -math.inf

    def decide(self, view: View) -> int:
        if view.now - self._polled_at >= self.polling_s - 1e-9:
            self._value = view.token_rate()
            self._polled_at = view.now
        raw = self.raw_recommendation(value=self._value, status_replicas=max(1, view.created))
        return self.behavior.apply(now=view.now, raw=raw, current=view.created)

    def raw_recommendation(self, *, value: float, status_replicas: int) -> int:
        usage = math.ceil(value / status_replicas)
        if abs(1.0 - usage / self.target) <= self.tolerance:
            return status_replicas
        return max(1, math.ceil(value / self.target))


class KnativeKpa:
    """Knative Serving KPA (v1.16, pkg/autoscaler/scaling/autoscaler.go) on concurrency,
    its native metric: in-flight requests per pod as the queue-proxy (and the activator,
    for requests queued in front of the pods) report them each second.

    Every 2 s: stable average over 60 s, panic average over 6 s; per-pod target =
    container-concurrency target x target utilisation 0.7. desired = ceil(average / target),
    bounded by max scale-up rate 1000 x ready pods and max scale-down rate 2 (no lower than
    ready / 2). Panic starts when the panic desired count / ready pods >= 2.0; while
    panicking the count never goes down, and panic ends 60 s after the last time it was
    above the threshold. Ready pods are those whose container passed its probe (at least 1).
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
    ) -> None:
        self.name = "knative-kpa"
        self.target = target_concurrency * utilization
        self.stable_window_s = stable_window_s
        self.panic_window_s = stable_window_s * panic_window_pct / 100.0
        self.panic_threshold = panic_threshold
        self.max_up = max_scale_up_rate
        self.max_down = max_scale_down_rate
        self.panic_since: float | None = None
        self.last_over: float = -math.inf
        self.max_panic_pods = 0

    @property
    def panicking(self) -> bool:
        return self.panic_since is not None

    def decide(self, view: View) -> int:
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
            self.last_over = view.now
            if self.panic_since is None:
                self.panic_since = view.now
        elif self.panic_since is not None and view.now - self.last_over > self.stable_window_s:
            self.panic_since = None
            self.max_panic_pods = 0
        if self.panic_since is not None:
            # Provision for the larger of the two windows; never lower while panicking.
            self.max_panic_pods = max(self.max_panic_pods, desired_stable, desired_panic)
            return max(1, self.max_panic_pods)
        return max(1, desired_stable)


class AibrixApa:
    """AIBrix APA (vllm-project/aibrix main, 2025: pkg/controller/podautoscaler/
    algorithm/apa.go and autoscaler.go) on output tokens/s per pod, averaged over the 60 s
    metric window across ready pods, evaluated every 10 s (resync).

    `computeTargetReplicas`: if use/target > 1 + 0.1: ceil(current x use/target), capped at
    ceil(2 x current); if use/target < 1 - 0.1: the same formula, floored at
    floor(current / 2); else unchanged. `applyPendingReplicaGuard`: while some replicas
    are not ready, a scale-up uses use x ready / current (pending pods count as missing
    metrics) and a scale-down counts pending pods at the target, each bounded between the
    current count and the raw recommendation. A scale-down is held until 300 s have
    passed since the last scaling action (scale-down cooldown).
    """

    interval_s = 10.0
    warmup_gate = False

    def __init__(
        self,
        *,
        target_per_pod: float,
        up_tolerance: float = 0.1,
        down_tolerance: float = 0.1,
        max_scale_up_rate: float = 2.0,
        max_scale_down_rate: float = 2.0,
        scale_down_cooldown_s: float = 300.0,
        window_s: float = 60.0,
    ) -> None:
        self.name = "aibrix-apa"
        self.target = target_per_pod
        self.up_tol, self.down_tol = up_tolerance, down_tolerance
        self.up_rate, self.down_rate = max_scale_up_rate, max_scale_down_rate
        self.cooldown_s = scale_down_cooldown_s
        self.window_s = window_s
        self.last_scale = -math.inf

    def compute(self, *, current: int, use_per_pod: float) -> int:
        ratio = use_per_pod / self.target
        if ratio > 1.0 + self.up_tol:
            return min(math.ceil(current * ratio), math.ceil(self.up_rate * current))
        if ratio < 1.0 - self.down_tol:
            return max(math.ceil(current * ratio), math.floor(current / self.down_rate))
        return current

    def guard_pending(self, *, raw: int, current: int, ready: int, use_per_pod: float) -> int:
        pending = current - ready
        if pending <= 0 or raw == current or current <= 0:
            return raw
        if raw > current:
            adjusted = use_per_pod * ready / current
            return min(max(math.ceil(current * adjusted / self.target), current), raw)
        adjusted = (use_per_pod * ready + self.target * pending) / current
        return max(min(math.ceil(current * adjusted / self.target), current), raw)

    def decide(self, view: View) -> int:
        current = view.created
        ready = min(view.container_ready, current)
        if ready == 0:
            return current
        use = view.token_rate(window_s=self.window_s) / ready
        raw = self.compute(current=current, use_per_pod=use)
        want = max(1, self.guard_pending(raw=raw, current=current, ready=ready, use_per_pod=use))
        if want < current and view.now - self.last_scale < self.cooldown_s:
            return current
        if want != current:
            self.last_scale = view.now
        return want


class StaticPeak:
    """Static allocation: the replicas the trace's peak needs, all the time, pre-warmed."""

    interval_s = 3600.0
    warmup_gate = True

    def __init__(self, *, replicas: int) -> None:
        self.name = "static-peak"
        self.replicas = replicas

    def decide(self, view: View) -> int:
        return self.replicas
