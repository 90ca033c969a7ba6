"""Where ours' missed minutes come from: each 1-minute window ours misses at its defaults,
classed by its fleet against the oracle's need in that minute.

    .venv/bin/python bench/misses.py [--case NAME ...] [--seed N] [--cache DIR]

Classes (docs/policy.md, "Nineteenth split", where the misses are):
- `asked, not warm`: ours had created at least the replicas the oracle needs there, but
  fewer of them were warmed (serving) than that: the ask came less than a start-up and
  warm-up before the minute;
- `not asked`: ours had not even created that many (its forecast or capacity said less);
- `warmed >= need`: as many warmed replicas as the oracle needs, and still a miss (the
  per-pod queues, the routing or a burst within the minute).
Each is split by whether the oracle's need was rising (above its value 5 minutes
earlier). Tuning cases only, like bench/tune.py (HOLD-OUT RULE there).
"""

from __future__ import annotations

import argparse
import collections
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import tune
from cases import CASES

from modelscale.simulate import suite
from modelscale.simulate.engine import View

RISING_LOOKBACK_MIN = 5


def classify(
    need: Sequence[float],
    warmed: dict[int, int],
    created: dict[int, int],
    missed: Sequence[int],
) -> collections.Counter[tuple[str, str]]:
    """Count each missed minute by (fleet class, need rising or not). `warmed`: the
    fewest warmed replicas ours had in each minute; `created`: the most it had asked for."""
    out: collections.Counter[tuple[str, str]] = collections.Counter()
    if not need:
        return out
    for i in missed:
        at = min(i, len(need) - 1)
        nd = need[at]
        trend = "rising" if nd > need[max(at - RISING_LOOKBACK_MIN, 0)] else "flat/falling"
        if warmed.get(i, 0) >= nd:
            kind = "warmed >= need"
        elif created.get(i, 0) >= nd:
            kind = "asked, not warm"
        else:
            kind = "not asked"
        out[kind, trend] += 1
    return out


def run_case(name: str, seed: int, cache: Path | None) -> collections.Counter[tuple[str, str]]:
    setup = tune.prepared(name, cache, seed)
    policy = suite.make_policy(suite.OURS, setup)
    decide = policy.decide
    warmed: dict[int, int] = {}
    created: dict[int, int] = {}

    def watched(view: View) -> int:
        minute = int(view.now // 60)
        warmed[minute] = min(warmed.get(minute, view.warmed), view.warmed)
        created[minute] = max(created.get(minute, 0), view.created)
        return decide(view)

    policy.decide = watched  # type: ignore[method-assign]
    windows = suite.run_policy(setup, policy).windows
    missed = [int(i) for i in np.where(~windows.met & ~windows.gap)[0]]
    return classify(list(setup.oracle_run.need), warmed, created, missed)


def main() -> int:
    tuning = [c.name for c in CASES if not c.held_out]
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--case", action="append", choices=tuning)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache", type=Path)
    args = parser.parse_args()
    total: collections.Counter[tuple[str, str]] = collections.Counter()
    for name in args.case or tuning:
        counts = run_case(name, args.seed, args.cache)
        total.update(counts)
        detail = ", ".join(f"{k} / {t}: {n}" for (k, t), n in sorted(counts.items()))
        print(f"{name:30s} missed {sum(counts.values()):2d}  {detail}", flush=True)
    print(f"total missed {sum(total.values())}")
    for (kind, trend), n in total.most_common():
        print(f"  {kind} / {trend}: {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
