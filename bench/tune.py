"""Ours at its defaults on the tuning cases, exactly as `make bench` runs it: the figures
docs/policy.md quotes for each policy change.

    nice -n 10 .venv/bin/python bench/tune.py [--case NAME ...] [--set FIELD=VALUE ...]
        [--scale X ...] [--cache DIR]

`--set` overrides a `PolicyConfig` field (e.g. `--set scale_down_hysteresis=0.5`);
`--scale X` also runs ours with its per-replica target at X x the load-tested capacity
(a point of the sweep grid). `--cache DIR` keeps each prepared case (load test, bound,
oracle: most of the time) as a pickle, so repeated runs take seconds per case.

HOLD-OUT RULE: only the tuning cases can run here (bench/cases.py, `held_out=False`); the
held-out ones are for `make bench` / `make bench-sweep` after a freeze commit.
"""

from __future__ import annotations

import argparse
import dataclasses
import pickle
import sys
import time
from pathlib import Path

import run as bench_run
from cases import CASES

from modelscale.autoscaling.types import PolicyConfig
from modelscale.simulate import suite


def overrides(items: list[str]) -> dict[str, float | bool]:
    """`FIELD=VALUE` pairs for PolicyConfig's numeric and boolean fields."""
    fields = {f.name: f for f in dataclasses.fields(PolicyConfig)}
    out: dict[str, float | bool] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or name not in fields:
            raise SystemExit(f"--set {item!r}: give FIELD=VALUE with a PolicyConfig field")
        default = getattr(PolicyConfig(), name)
        if isinstance(default, bool):
            out[name] = value.lower() in ("1", "true", "yes")
        elif isinstance(default, int | float):
            out[name] = type(default)(float(value))
        else:
            raise SystemExit(f"--set {name}: only numeric and boolean fields can be set here")
    return out


def prepared(case_name: str, cache: Path | None) -> suite.Setup:
    case = next(c for c in CASES if c.name == case_name)
    path = None if cache is None else cache / f"setup-{case.name}.pkl"
    if path is not None and path.exists():
        setup: suite.Setup = pickle.loads(path.read_bytes())  # our own cache file
        return setup
    setup = bench_run.prepare(case, 0)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pickle.dumps(setup))
    return setup


def main() -> int:
    tuning = [c.name for c in CASES if not c.held_out]
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--case", action="append", choices=tuning)
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE")
    parser.add_argument("--scale", action="append", type=float, default=[])
    parser.add_argument("--cache", type=Path)
    args = parser.parse_args()
    changed = overrides(args.set)
    base = suite.ours_config

    def configured(setup: suite.Setup, *, scale: float | None = None) -> PolicyConfig:
        return dataclasses.replace(base(setup, scale=scale), **changed)

    suite.ours_config = configured  # type: ignore[assignment]
    for name in args.case or tuning:
        setup = prepared(name, args.cache)
        for scale in [None, *args.scale]:
            began = time.perf_counter()
            result = suite.run_policy(setup, suite.make_policy(suite.OURS, setup, scale=scale))
            f = suite.evaluate(setup, result)
            label = "defaults" if scale is None else f"target x{scale:g}"
            print(
                f"{name:18s} {label:12s} windows {f.slo_attainment_windows:7.2%}  "
                f"replica-s {f.replica_seconds:9,.0f}  {f.excess_over_oracle + 1:.3f}x oracle  "
                f"{f.scale_events} events  ({time.perf_counter() - began:.0f} s)",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
