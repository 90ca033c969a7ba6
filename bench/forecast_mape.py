"""Forecast error (MAPE) of each token-rate forecaster on each shared trace.

    .venv/bin/python bench/forecast_mape.py [--traces DIR]

Series, as the operator would see them (output tokens/s):
- azure2023_*: per-request traces; the token rate is what `rate(...[1m])` shows, i.e. the
  output tokens of requests that arrived in the trailing 60 s / 60, sampled every 15 s.
- servegen_*: 10-minute aggregates; rate = total_rps * mean_output_tokens per window,
  piecewise-linear between window centres and sampled every 60 s (finer data does not
  exist; a 2-minute horizon on 10-minute data is therefore optimistic for every model).

Each forecaster is updated online, sample by sample; at every sample it forecasts the
rate `h` seconds later (mean, not the upper bound). MAPE = mean |forecast - actual| /
actual over samples whose actual rate is at least 5 % of the series mean, skipping the
first 10 minutes (Azure) or the first day (servegen: the seasonal model needs one day).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from modelscale.autoscaling import forecast

HORIZONS = (120.0, 600.0)
DEFAULT_TRACES = Path(__file__).resolve().parent / "traces"


def azure_series(
    path: Path, *, step: float = 15.0, window: float = 60.0
) -> list[tuple[float, float]]:
    with gzip.open(path, "rt") as fh:
        rows = [(float(r["t_s"]), float(r["output_tokens"])) for r in csv.DictReader(fh)]
    end = rows[-1][0]
    out: list[tuple[float, float]] = []
    lo = hi = 0
    acc = 0.0
    t = window
    while t <= end:
        while hi < len(rows) and rows[hi][0] < t:
            acc += rows[hi][1]
            hi += 1
        while lo < hi and rows[lo][0] < t - window:
            acc -= rows[lo][1]
            lo += 1
        out.append((t, acc / window))
        t += step
    return out


def servegen_series(path: Path, *, step: float = 60.0) -> list[tuple[float, float]]:
    with gzip.open(path, "rt") as fh:
        pts = [
            (
                float(r["window_start_s"]) + 300.0,
                float(r["total_rps"]) * float(r["mean_output_tokens"] or 0.0),
            )  # idle: ""
            for r in csv.DictReader(fh)
        ]
    out: list[tuple[float, float]] = []
    t = pts[0][0]
    i = 0
    while t <= pts[-1][0]:
        while pts[i + 1][0] < t:
            i += 1
        (t0, v0), (t1, v1) = pts[i], pts[i + 1]
        out.append((t, v0 + (v1 - v0) * (t - t0) / (t1 - t0)))
        t += step
    return out


def mape(
    f: forecast.Forecaster[Any],
    series: Sequence[tuple[float, float]],
    *,
    horizon: float,
    skip: float,
) -> float:
    """Online MAPE at `horizon`; series times are offsets, shifted onto a Monday 00:00 UTC
    so that time of day is meaningful for the seasonal model."""
    base = 1_700_438_400.0  # 2023-11-20 00:00 UTC, a Monday
    mean = sum(v for _, v in series) / len(series)
    index = {round(t, 3): v for t, v in series}
    state = f.initial()
    errors = 0.0
    count = 0
    t_start = series[0][0]
    for t, v in series:
        state = f.update(state, t=base + t, value=v)
        actual = index.get(round(t + horizon, 3))
        if actual is None or t - t_start < skip or actual < 0.05 * mean:
            continue
        predicted = f.forecast(state, t=base + t, horizon=horizon).mean
        errors += abs(predicted - actual) / actual
        count += 1
    return 100.0 * errors / max(count, 1)


def coverage(
    f: forecast.Forecaster[Any],
    series: Sequence[tuple[float, float]],
    *,
    horizon: float,
    skip: float,
) -> float:
    """Share (%) of samples whose actual rate `horizon` later was at or below the
    forecast's upper bound (the bound the recommender plans for; nominal 95 %)."""
    index = {round(t, 3): v for t, v in series}
    state = f.initial()
    covered = count = 0
    for t, v in series:
        state = f.update(state, t=t, value=v)
        actual = index.get(round(t + horizon, 3))
        if actual is None or t - series[0][0] < skip:
            continue
        count += 1
        covered += actual <= f.forecast(state, t=t, horizon=horizon).upper
    return 100.0 * covered / max(count, 1)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=Path, default=DEFAULT_TRACES)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    traces: list[tuple[str, list[tuple[float, float]], float]] = []
    for path in sorted(args.traces.glob("azure2023_*.csv.gz")):
        traces.append((path.name.split(".")[0], azure_series(path), 600.0))
    for path in sorted(args.traces.glob("servegen_*.csv.gz")):
        traces.append((path.name.split(".")[0], servegen_series(path), 86400.0))
    if not traces:
        print(f"no traces in {args.traces}", file=sys.stderr)
        return 1
    names = list(forecast.FORECASTERS)
    header = (
        f"{'trace':<38} {'horizon':>7} "
        + " ".join(f"{n:>9}" for n in names)
        + f" {'upper covers':>13}"
    )
    print("MAPE % of the forecast mean (lower is better); last column: share of actuals")
    print("at or below the seasonal forecaster's upper bound (nominal 95 %)")
    print(header)
    print("-" * len(header))
    for name, series, skip in traces:
        for h in HORIZONS:
            cells = [mape(forecast.FORECASTERS[n], series, horizon=h, skip=skip) for n in names]
            cover = coverage(forecast.FORECASTERS["seasonal"], series, horizon=h, skip=skip)
            print(
                f"{name:<38} {h / 60:>5.0f} m "
                + " ".join(f"{c:>9.1f}" for c in cells)
                + f" {cover:>12.1f}%"
            )
    print(f"({time.perf_counter() - started:.1f} s)")
    print(recommend_speed(args.traces))
    return 0


def recommend_speed(traces: Path) -> str:
    """Time per `recommend()` call, replaying 3 days of ServeGen m-small every 15 s
    through the whole policy (forecasters, capacity model, stabilisation, JSON state)."""
    from modelscale.autoscaling import recommender  # noqa: PLC0415 (only for this line)
    from modelscale.autoscaling.types import Observation, PolicyConfig, ScalingState  # noqa: PLC0415

    path = traces / "servegen_language_m-small_10min.csv.gz"
    series = servegen_series(path, step=15.0)[: 3 * 5760]
    config = PolicyConfig(max_replicas=50, target_tokens_per_replica=3000.0)
    state, replicas, base = ScalingState(), 2, 1_700_438_400.0
    started = time.perf_counter()
    for t, v in series:
        now = base + t
        obs = Observation(
            now=now,
            token_rate=v,
            p99_seconds=1.0,
            queue_depth=0.0,
            sample_time=now - 5,
            warmed_replicas=replicas,
            current_replicas=replicas,
        )
        rec, state = recommender.recommend(obs, config=config, state=state)
        replicas = rec.replicas
    per_call = (time.perf_counter() - started) / len(series) * 1e6
    size = len(json.dumps(state.to_dict()))
    return f"recommend(): {per_call:.0f} us per call over {len(series)} calls; status {size} bytes"


if __name__ == "__main__":
    sys.exit(main())
