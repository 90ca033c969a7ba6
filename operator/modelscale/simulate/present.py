"""The present-knowing reference: what reacting perfectly, with no forecast, costs.

The oracle knows the whole future; every policy we compare knows only the past, through
metrics that lag and a capacity it must learn. Between them sits a reference that knows
the **present exactly** and nothing of the future: every 15 s it knows the requests that
arrived in the last minute, their mix (their answers' lengths too, which a real system
learns only as they finish), and what one warm replica sustains at that mix (the fluid
model, `bound.trailing_fluid_load`), with no scrape, no rate window and no capacity to
learn. It asks for that need times (1 + margin) at once and keeps a replica
until it has been unneeded for one start-up horizon (the oracle's rule for dips). Its
replicas still take a start-up and warm-up to arrive, like everyone's, behind the same
gate and from the same start.

So the gap from the oracle to this reference is what knowing the future is worth on a
trace, and the gap from this reference to a policy is what the policy loses by reading
the present through metrics and learning the capacity. `cheapest_margin` finds, in
hindsight and per trace, the smallest margin with which it meets the 99 % window target:
only hindsight can choose that, so the reference is optimistic for a reactive policy.
It is not a proven bound on every causal policy (one that foresees a step can beat it),
and the oracle is not a proven minimum: the reference can come out below it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from modelscale.simulate.engine import View

NAME = "present-oracle"
INTERVAL_S = 15.0  # decides as often as ours and the HPA
# The margins searched: upper end of the bracket and the bisection's resolution.
MAX_MARGIN = 2.0
MARGIN_STEP = 0.025


class PresentOracle:
    """Asks for ceil((1 + margin) x the largest need known within the last `hold_s`),
    gated like ours (never serves cold). `need[i]` is known from `times[i]` on (sorted);
    a value stays in force until the next one, and counts for `hold_s` after that."""

    warmup_gate = True
    interval_s = INTERVAL_S

    def __init__(
        self,
        *,
        times: NDArray[np.float64],
        need: NDArray[np.float64],
        margin: float,
        hold_s: float,
    ) -> None:
        if margin < 0:
            raise ValueError(f"margin must be >= 0, got {margin}")
        if hold_s < 0:
            raise ValueError(f"hold_s must be >= 0, got {hold_s}")
        if need.size == 0 or need.size != times.size:
            raise ValueError("need and times must be non-empty and of the same length")
        self.name = NAME
        self.times = times
        self.need = need
        self.margin = margin
        self.hold_s = hold_s

    def replicas_at(self, now: float) -> int:
        # 1e-9: a decision at exactly a sample's time sees that sample.
        last = int(np.searchsorted(self.times, now + 1e-9, side="right")) - 1
        if last < 0:
            return 1
        first = int(np.searchsorted(self.times, now - self.hold_s + 1e-9, side="right")) - 1
        need = float(self.need[max(first, 0) : last + 1].max())
        # 1e-9: (1 + 0.25) x 4 is exactly 5 replicas, not 6 through rounding.
        return max(1, math.ceil((1.0 + self.margin) * need - 1e-9))

    def decide(self, view: View) -> int:
        return self.replicas_at(view.now)


@dataclass(frozen=True)
class Point:
    """One replay of the reference: its margin, whether it met the window target, and
    its replica-seconds."""

    margin: float
    attainment: float
    replica_seconds: float
    meets: bool


@dataclass(frozen=True)
class Search:
    best: Point | None  # the cheapest point that met the target; None: none did
    points: tuple[Point, ...]  # every replay, in the order run


def cheapest_margin(
    replay: Callable[[float], Point],
    *,
    max_margin: float = MAX_MARGIN,
    step: float = MARGIN_STEP,
) -> Search:
    """The cheapest replay that meets the target over margins 0 .. `max_margin`: check
    0 and the top, then bisect on whether the target is met down to `step`. Attainment
    need not be monotone in the margin, so the answer is the cheapest point that met the
    target among all replays, not just the bisection's last one."""
    points: list[Point] = []

    def run(margin: float) -> Point:
        point = replay(round(margin, 6))
        points.append(point)
        return point

    if not run(0.0).meets:
        lo, hi = 0.0, max_margin
        if run(hi).meets:
            while hi - lo > step + 1e-9:
                mid = (lo + hi) / 2
                if run(mid).meets:
                    hi = mid
                else:
                    lo = mid
    met = [p for p in points if p.meets]
    best = min(met, key=lambda p: p.replica_seconds) if met else None
    return Search(best, tuple(points))
