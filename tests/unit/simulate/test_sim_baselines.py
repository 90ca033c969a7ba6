"""Each peer autoscaler's documented behaviour, on hand-made observations."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from modelscale.simulate import baselines


@dataclass
class FakeView:
    now: float = 0.0
    created: int = 4
    container_ready: int = 4
    warmed: int = 4
    queue_depth: int = 0
    rate: float = 0.0
    conc_stable: float = 0.0
    conc_panic: float = 0.0

    def token_rate(self, *, window_s: float = 60.0) -> float:
        return self.rate

    def concurrency(self, *, window_s: float) -> float:
        return self.conc_panic if window_s < 10 else self.conc_stable


def decide(policy: Any, **view: Any) -> int:
    result: int = policy.decide(FakeView(**view))
    return result


# ---------------------------------------------------------------- HPA


@pytest.mark.parametrize(
    ("rate", "expected"),
    [
        pytest.param(4 * 100 * 1.05, 4, id="within-tolerance-holds"),
        pytest.param(4 * 100 * 1.2, 5, id="above-tolerance-scales"),
        pytest.param(4 * 100 * 10, 8, id="scale-up-limited-to-100pct"),
    ],
)
def test_hpa_tolerance_and_scale_up_limit(rate: float, expected: int) -> None:
    assert decide(baselines.Hpa(target_per_pod=100), rate=rate) == expected


def test_hpa_scale_up_limit_is_at_least_four_pods() -> None:
    assert decide(baselines.Hpa(target_per_pod=100), created=1, container_ready=1, rate=5000) == 5


def test_hpa_holds_scale_down_for_the_stabilisation_window() -> None:
    hpa = baselines.Hpa(target_per_pod=100)
    assert decide(hpa, now=0, rate=400) == 4
    seen = [(t, decide(hpa, now=t, rate=100)) for t in range(15, 331, 15)]
    assert all(r == 4 for t, r in seen if t < 300)
    assert all(r == 1 for t, r in seen if t >= 300)


def test_hpa_missing_pods_dampen_scale_up() -> None:
    # 2 of 4 pods still loading (no metric): counted at 0 when scaling up.
    hpa = baselines.Hpa(target_per_pod=100)
    assert hpa.raw_recommendation(total=600, current=4, with_metric=2) == 6
    # 4 pods with metrics alone would have given ceil(600/100 / 2 * 2) = 6 too, but with
    # usage just above target the missing pods flip the direction: no change.
    assert hpa.raw_recommendation(total=230, current=4, with_metric=2) == 4


# ---------------------------------------------------------------- KEDA


@pytest.mark.parametrize(
    ("value", "status_replicas", "expected"),
    [
        # 4 ready pods at 1.5x the target, 4 more still loading: the AverageValue is
        # 600/8 = 0.75x the target, so the HPA wants fewer pods, not more.
        pytest.param(600.0, 8, 6, id="loading-pods-hide-overload"),
        pytest.param(600.0, 4, 6, id="all-ready"),
        pytest.param(410.0, 4, 4, id="within-tolerance"),
    ],
)
def test_keda_divides_by_all_replicas_including_loading_ones(
    value: float, status_replicas: int, expected: int
) -> None:
    keda = baselines.Keda(target_per_pod=100)
    assert keda.raw_recommendation(value=value, status_replicas=status_replicas) == expected


def test_keda_requeries_the_metric_at_every_hpa_sync() -> None:
    # useCachedMetrics defaults to false: each 15 s HPA sync gets a fresh query.
    keda = baselines.Keda(target_per_pod=100)
    assert decide(keda, now=0, rate=400) == 4
    assert decide(keda, now=15, rate=4000) == 8  # +100 % per 15 s, not a 30 s old value


# ---------------------------------------------------------------- Knative KPA


def test_kpa_panics_on_a_burst_and_does_not_scale_down_while_panicking() -> None:
    kpa = baselines.KnativeKpa(target_concurrency=10)  # 7 per pod at utilisation 0.7
    # Panic window sees 2.5x the ready capacity: panic, scale to the panic count.
    assert decide(kpa, now=0, conc_stable=28, conc_panic=70) == 10
    assert kpa.panicking
    # The burst is over, but panic lasts 60 s after it was last over the threshold.
    over = {"created": 10, "container_ready": 10, "conc_stable": 28, "conc_panic": 7}
    assert decide(kpa, now=30, **over) == 10
    assert decide(kpa, now=58, **over) == 10
    assert decide(kpa, now=62, **over) == 5
    assert not kpa.panicking


@pytest.mark.parametrize(
    ("ready", "stable", "expected"),
    [
        pytest.param(8, 7.0, 4, id="max-scale-down-rate-2"),
        pytest.param(8, 35.0, 5, id="stable-window-count"),
        pytest.param(2, 14.0, 2, id="at-target"),
    ],
)
def test_kpa_stable_mode(ready: int, stable: float, expected: int) -> None:
    kpa = baselines.KnativeKpa(target_concurrency=10)
    # Long after the start-up panic (see below) has ended.
    view = {"now": 1000, "created": ready, "container_ready": ready}
    assert decide(kpa, **view, conc_stable=stable, conc_panic=stable) == expected


def test_kpa_fresh_autoscaler_starts_in_panic_and_keeps_the_ready_pods() -> None:
    # newAutoscaler: more than one ready pod -> panic from creation (t=0), max panic pods
    # = ready pods; it lets go once the panic time is more than 60 s old.
    kpa = baselines.KnativeKpa(target_concurrency=10)
    low = {"created": 8, "container_ready": 8, "conc_stable": 7.0, "conc_panic": 7.0}
    assert decide(kpa, now=60, **low) == 8
    assert kpa.panicking
    assert decide(kpa, now=62, **low) == 4
    assert not kpa.panicking


def test_kpa_fresh_autoscaler_with_one_pod_starts_stable() -> None:
    kpa = baselines.KnativeKpa(target_concurrency=10)
    assert decide(kpa, now=60, created=1, container_ready=1, conc_stable=3, conc_panic=3) == 1
    assert not kpa.panicking


# ---------------------------------------------------------------- AIBrix APA


@pytest.mark.parametrize(
    ("current", "use", "expected"),
    [
        pytest.param(4, 105.0, 4, id="up-tolerance-holds"),
        pytest.param(4, 95.0, 4, id="down-tolerance-holds"),
        pytest.param(4, 150.0, 6, id="scales-up"),
        pytest.param(4, 500.0, 8, id="up-rate-capped-at-2x"),
        pytest.param(8, 10.0, 4, id="down-rate-floored-at-half"),
        pytest.param(8, 60.0, 5, id="scales-down"),
    ],
)
def test_apa_rate_limits_and_tolerance(current: int, use: float, expected: int) -> None:
    apa = baselines.AibrixApa(target_per_pod=100)
    assert apa.compute(current=current, use_per_pod=use) == expected


def test_apa_averages_its_snapshots_over_the_180_s_window() -> None:
    apa = baselines.AibrixApa(target_per_pod=100)
    # Snapshots every 10 s at 100 per pod (4 ready pods): on target, no change.
    assert {decide(apa, now=t, rate=400) for t in range(0, 180, 10)} == {4}
    # A burst to 400 per pod: the window [0, 180] s averages 18 x 100 + 400 over 19
    # snapshots = 115.8 per pod, 1.16x the target -> ceil(4 x 1.16) = 5, not 8.
    assert decide(apa, now=180, rate=1600) == 5


def test_apa_scale_down_takes_the_lowest_recommendation_of_the_window() -> None:
    # AIBrix's stabilizeRecommendation picks the *minimum* recommendation of the last
    # 300 s on a scale-down: it does not delay scaling down, and repeats the lowest.
    apa = baselines.AibrixApa(target_per_pod=100, window_s=10)  # one snapshot per window
    eight = {"created": 8, "container_ready": 8}
    assert decide(apa, now=0, **eight, rate=8 * 50) == 4  # 0.5x: ceil(8 x 0.5) = 4
    assert decide(apa, now=20, **eight, rate=8 * 75) == 4  # raw 6; min(4, 6) = 4
    assert decide(apa, now=301, **eight, rate=8 * 75) == 6  # the 4 has left the window


def test_apa_scale_up_is_not_stabilised() -> None:
    apa = baselines.AibrixApa(target_per_pod=100, window_s=10)
    assert decide(apa, now=0, rate=4 * 50) == 2
    assert decide(apa, now=20, rate=4 * 150) == 6


def test_apa_counts_a_pod_still_starting_as_zero() -> None:
    # Upstream rule (vllm-project/aibrix pkg/controller/podautoscaler/metrics/fetcher.go,
    # RestMetricsFetcher.fetchFromPod): a pod with an IP whose /metrics does not answer
    # yields 0.0, not an error, so collector.go's snapshot has one value per pod and
    # client.go's UpdateMetrics averages over all of them. 8 created, 4 ready at 300 tok/s
    # each: the mean is 1200 / 8 = 150, 1.5x the target -> ceil(8 x 1.5) = 12.
    apa = baselines.AibrixApa(target_per_pod=100)
    assert decide(apa, created=8, container_ready=4, rate=1200) == 12


def test_apa_does_not_compound_while_new_pods_are_starting() -> None:
    # 4 ready pods at 3x the target: doubled to 8 (max scale-up rate 2). At the next
    # resync the 4 new pods are still loading and report 0, so the mean halves and APA asks
    # for what the load needs (1200 / 100 = 12), not for another doubling to 16.
    apa = baselines.AibrixApa(target_per_pod=100, window_s=10)  # one snapshot per window
    assert decide(apa, now=0, created=4, container_ready=4, rate=1200) == 8
    assert decide(apa, now=20, created=8, container_ready=4, rate=1200) == 12
    assert decide(apa, now=40, created=12, container_ready=4, rate=1200) == 12


def test_apa_scales_down_when_no_pod_answers_yet() -> None:
    # Pods with an IP that all fail to answer are zeros, not "failed to collect metrics
    # from all pods" (that needs every fetch to error: pods without an IP): the mean is 0
    # and APA recommends floor(3 / 2) = 1, as upstream would.
    apa = baselines.AibrixApa(target_per_pod=100)
    assert decide(apa, created=3, container_ready=0, rate=0) == 1


def test_static_peak_never_changes() -> None:
    policy = baselines.StaticPeak(replicas=7)
    assert {decide(policy, now=t, rate=r) for t, r in [(0, 0), (10, 1e6)]} == {7}
