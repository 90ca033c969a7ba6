"""Where ours' replica-seconds above the oracle's need go, by the rule each pass names.

    nice -n 10 .venv/bin/python bench/overshoot.py --cache DIR [--seed N] [--case NAME ...]
        [--workers N]

Every tuning case (or those named) is replayed with ours at its defaults exactly as
`bench/tune.py` runs it. On each pass where the replicas created so far exceed the
oracle's need for that minute, the excess replica-seconds go under the rule the pass's
message names: the forecast and capacity asking for more than the need ("sizing"), a
latency or queue rule acting on now ("latency/queue now"), the scale-down hysteresis, the
stabilization window, the untested reach (1x the heaviest load seen), the other reaches,
the peak window, the one-replica step down; anything else under "other". A diagnostic
read from the messages a user sees (holds have no reason code of their own), not a
score: the oracle's need is hindsight per minute, so part of any excess is the margin a
forecast needs. Prints each case's excess per rule as a share of the oracle's
replica-seconds, then the sums over the cases (docs/policy.md, "Where the cost goes").
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import tune
from cases import CASES

from modelscale.autoscaling import recommender
from modelscale.simulate import suite
from modelscale.simulate.view import View

_NEEDS = re.compile(r"needs (\d+) replicas?")
# In order: the first that matches names the rule.
_HOLDS = (
    ("stabilization window", "was recommended within the last"),
    ("hysteresis", "of spare demand to scale down"),
    ("untested reach 1x", "beyond 1x the heaviest load per replica seen"),
    ("reach", "the heaviest load per replica seen"),
    ("peak window", "often followed by a rebound"),
    ("one step down", "at most 1 per decision"),
)


def rule(reason: str, message: str, *, need: float) -> str:
    """The rule one pass's recommendation names for replicas above `need`."""
    if reason in (recommender.LATENCY_SLO, recommender.QUEUE_BUILDUP):
        return "latency/queue now"
    wanted = _NEEDS.search(message)
    if wanted is not None and int(wanted.group(1)) > need:
        return "sizing"
    for name, words in _HOLDS:
        if words in message:
            return name
    return "other"


def overshoot(job: tuple[str, int, Path]) -> tuple[str, float, dict[str, float]]:
    """One case and seed: ours' cost over the oracle's and each rule's excess share."""
    name, seed, cache = job
    setup = tune.prepared(name, cache, seed)
    policy = suite.make_policy(suite.OURS, setup)
    need = list(setup.oracle_run.need)
    decide = policy.decide
    excess: Counter[str] = Counter()
    seen: list[float] = []  # the previous pass's time: each pass counts until the next

    def watched(view: View) -> int:
        asked = decide(view)
        period = view.now - seen[-1] if seen else 0.0
        seen[:] = [view.now]
        n = need[min(int(view.now // 60), len(need) - 1)]
        if view.created > n and policy.last is not None:
            last = policy.last
            excess[rule(last.reason, last.message, need=n)] += (view.created - n) * period
        return asked

    policy.decide = watched  # type: ignore[method-assign]
    result = suite.run_policy(setup, policy)
    oracle = setup.oracle_run.result.replica_seconds
    return name, result.replica_seconds / oracle, {k: v / oracle for k, v in excess.items()}


def main() -> int:
    tuning = [c.name for c in CASES if not c.held_out]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", action="append", choices=tuning, default=[])
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    jobs = [(name, args.seed, args.cache) for name in (args.case or tuning)]
    total: Counter[str] = Counter()
    with ProcessPoolExecutor(args.workers) as pool:
        for name, ratio, shares in pool.map(overshoot, jobs):
            top = sorted(shares.items(), key=lambda kv: -kv[1])
            print(f"{name:34s} {ratio:.3f}x  " + ", ".join(f"{k} {v:.3f}" for k, v in top))
            total.update(shares)
    whole = sum(total.values())
    print(f"sums over {len(jobs)} cases (shares of each case's oracle replica-seconds):")
    for k, v in total.most_common():
        print(f"  {k:22s} {v:6.2f}  ({v / whole:.0%} of the excess)" if whole else f"  {k}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
