"""Start-up statistics of a ModelDeployment's pods (creation to ready, creation to
warmed): the autoscaler's measured horizon and `status.warmUp`. Pure."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from modelscale.podfacts import PodFacts, time_or_none


@dataclass(frozen=True)
class StartupStats:
    samples_ready: int
    samples_warm: int
    median_seconds_to_ready: float | None
    median_seconds_to_warm: float | None


class StartupSeconds(NamedTuple):
    """One pod's start-up: creation to containers ready, creation to warmed."""

    ready: float | None
    warm: float | None


def seconds_to_ready(facts: PodFacts) -> float | None:
    if facts.created is None or facts.containers_ready_since is None:
        return None
    return max(0.0, facts.containers_ready_since - facts.created)


def seconds_since_created(facts: PodFacts, *, now: float) -> float | None:
    return None if facts.created is None else max(0.0, now - facts.created)


def pod_startup_seconds(facts: PodFacts) -> StartupSeconds:
    """Annotations first (they survive container restarts), else the conditions'
    transition times."""
    ready = (
        facts.seconds_to_ready if facts.seconds_to_ready is not None else seconds_to_ready(facts)
    )
    warm = facts.seconds_to_warm
    if warm is None and facts.warmed and facts.created is not None and facts.warmed_condition:
        since = time_or_none(facts.warmed_condition.last_transition_time)
        warm = None if since is None else max(0.0, since - facts.created)
    return StartupSeconds(ready=ready, warm=warm)


def stats_for(
    *, md_namespace: str, md_name: str, pods: Iterable[PodFacts], recent: int = 20
) -> StartupStats:
    """Median start-up times over the `recent` newest measured pods of one ModelDeployment."""
    mine = [f for f in pods if f.namespace == md_namespace and f.modeldeployment == md_name]
    mine.sort(key=lambda f: f.created or 0.0, reverse=True)
    ready: list[float] = []
    warm: list[float] = []
    for f in mine:
        r, w = pod_startup_seconds(f)
        if r is not None and len(ready) < recent:
            ready.append(r)
        if w is not None and len(warm) < recent:
            warm.append(w)
    return StartupStats(
        samples_ready=len(ready),
        samples_warm=len(warm),
        median_seconds_to_ready=statistics.median(ready) if ready else None,
        median_seconds_to_warm=statistics.median(warm) if warm else None,
    )
