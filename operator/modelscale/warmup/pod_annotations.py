"""Pod annotations the warm-up keeps, decided without I/O: the start-up figures (written
once), the attempt counter and the deletion cost that orders scale-down."""

from __future__ import annotations

from modelscale.podfacts import (
    ANNOTATION_ATTEMPTS,
    ANNOTATION_DELETION_COST,
    ANNOTATION_SECONDS_TO_READY,
    ANNOTATION_SECONDS_TO_WARM,
    ANNOTATION_WARMED_RESTARTS,
    PodFacts,
)
from modelscale.warmup.startup import pod_startup_seconds, seconds_since_created, seconds_to_ready


def deletion_cost(*, containers_ready: bool, warmed: bool, load: float | None) -> int:
    """`controller.kubernetes.io/pod-deletion-cost`: the ReplicaSet deletes lower costs first.

    Pods still starting go first, then pods warming, then warmed pods by load (requests/s
    over the last refresh, in hundredths; unknown load counts as idle).
    """
    if not containers_ready:
        return -2000
    if not warmed:
        return -1000
    milli = round(max(0.0, load or 0.0) * 100)
    return min(1_000_000, milli)


def annotation_updates(
    facts: PodFacts,
    *,
    now: float,
    load: float | None,
    warmed: bool | None = None,
    attempts: int | None = None,
) -> dict[str, str]:
    """Pod annotations that need writing (only those that change): start-up figures (once),
    the attempt counter and the deletion cost. `warmed`/`attempts` override the facts when
    the caller is about to change them."""
    out: dict[str, str] = {}
    is_warmed = facts.warmed if warmed is None else warmed
    if facts.seconds_to_ready is None and facts.containers_ready:
        ready = seconds_to_ready(facts)
        if ready is not None:
            out[ANNOTATION_SECONDS_TO_READY] = f"{ready:.1f}"
    if is_warmed and facts.seconds_to_warm is None:
        warm = seconds_since_created(facts, now=now)
        if facts.warmed and facts.warmed_condition is not None:
            # Already warmed (by an earlier operator run): the condition knows when.
            warm = pod_startup_seconds(facts).warm
        if warm is not None:
            out[ANNOTATION_SECONDS_TO_WARM] = f"{warm:.1f}"
    if attempts is not None and attempts != facts.attempts:
        out[ANNOTATION_ATTEMPTS] = str(attempts)
    if warmed and not facts.warmed:  # about to open the gate: remember the restart count
        out[ANNOTATION_WARMED_RESTARTS] = str(facts.restarts)
    cost = deletion_cost(containers_ready=facts.containers_ready, warmed=is_warmed, load=load)
    old = facts.annotations.get(ANNOTATION_DELETION_COST)
    if old is None or cost_needs_update(old=int(old) if _is_int(old) else None, new=cost):
        out[ANNOTATION_DELETION_COST] = str(cost)
    return out


def _is_int(text: str) -> bool:
    return text.lstrip("-").isdigit()


def cost_needs_update(*, old: int | None, new: int) -> bool:
    """Rewrite the cost when its class changes or the load moved by more than 20 %: every
    write is a pod update for every watcher, so small load wiggles are not worth one."""
    if old is None:
        return True
    if (old < 0) != (new < 0) or (old < 0 and old != new):
        return True
    return abs(new - old) > max(10, 0.2 * abs(old))


def request_rate(
    *, previous_count: float, previous_time: float, count: float, time: float
) -> float | None:
    """Requests/s between two samples of a counter; None across a counter reset."""
    if time <= previous_time or count < previous_count:
        return None
    return (count - previous_count) / (time - previous_time)
