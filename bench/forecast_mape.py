"""Forecast error (MAPE) and coverage of each token-rate forecaster on each shared trace:
ours (`modelscale.autoscaling.forecast`) beside NVIDIA Dynamo's planner load predictors
(`dynamo.planner.core.load.predictors`, from the installed ai-dynamo 1.6.1, `make bench`
installs it), on the same series, horizons and evaluation points.

    .venv/bin/python bench/forecast_mape.py [--traces DIR] [--max-points N] [--no-dynamo]

Series, as the operator would see them (output tokens/s):
- azure2023_*: per-request traces; the token rate is what `rate(...[1m])` shows, i.e. the
  output tokens of requests that arrived in the trailing 60 s / 60, sampled every 15 s.
- servegen_*: 10-minute aggregates; rate = total_rps * mean_output_tokens per window,
  piecewise-linear between window centres and sampled every 60 s (finer data does not
  exist; a 2-minute horizon on 10-minute data is therefore optimistic for every model).

Evaluation points: after the first 10 minutes (Azure) or the first day (servegen: our
seasonal model needs one day), at most `--max-points` of them (default 300) per trace and
horizon: every sample of the hour-long Azure series; on servegen, every `h` seconds from
the series' start (Dynamo's ARIMA and Prophet refit per step). At each point every
forecaster forecasts the rate `h` seconds later.
- Ours are updated online with every sample (15 s / 60 s), as the operator feeds them,
  and forecast `h` ahead (mean for MAPE, upper bound for coverage).
- Dynamo's predictors run as its planner runs them: one data point per adjustment
  interval, with the interval set to `h` (`throughput_adjustment_interval_seconds`, also
  Prophet's step), `predict_next()` after each; their one-step forecast is the forecast
  `h` ahead, and it is also what the planner provisions for (no upper bound). Where
  points fall between grid instants (Azure), one predictor per phase of the grid. They are
  fed from 50 intervals before the first evaluation point (Prophet's default window is
  50 points; ARIMA's update cost grows with its history: about 0.1 s per step at 400
  points here, so a 14-day series at 2-minute steps would take hours).
The planner forecasts request count and mean lengths separately; here each predictor
forecasts the token-rate series directly, like ours.

MAPE = mean |forecast - actual| / actual over points whose actual rate is at least 5 % of
the series mean. Coverage = share (%) of points whose actual rate was at or below what
the forecaster plans for (ours: the upper bound, nominal 95 %; Dynamo's: its forecast).
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
from typing import Any, NamedTuple

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


class Score(NamedTuple):
    mape: float  # %
    coverage: float  # %
    points: int  # evaluation points scored for MAPE


BASE = 1_700_438_400.0  # 2023-11-20 00:00 UTC, a Monday: series offsets shift onto it
DYNAMO_WARM_POINTS = 50


def evaluation_points(
    series: Sequence[tuple[float, float]],
    *,
    horizon: float,
    skip: float,
    max_points: int,
    every_sample: bool,
) -> list[int]:
    """Indices of the evaluation points: after `skip`, with an actual value `horizon`
    later; every sample, or only those on the horizon grid from the series' start."""
    t0 = series[0][0]
    times = {round(t, 3) for t, _ in series}
    out: list[int] = []
    for i, (t, _) in enumerate(series):
        if t - t0 < skip or round(t + horizon, 3) not in times:
            continue
        if not every_sample and _offset(t - t0, horizon) > 1e-6:
            continue
        out.append(i)
        if len(out) == max_points:
            break
    return out


def _offset(elapsed: float, horizon: float) -> float:
    """Position of `elapsed` within its horizon-long interval (0 on the grid)."""
    r = round(elapsed % horizon, 3)
    return 0.0 if r >= horizon - 1e-3 else r


def _score(pairs: list[tuple[float, float, float]], *, mean: float) -> Score:
    """(forecast mean, planned-for value, actual) per point -> MAPE and coverage."""
    errs = [abs(p - a) / a for p, _, a in pairs if a >= 0.05 * mean]
    covered = sum(1 for _, u, a in pairs if a <= u)
    return Score(
        mape=100.0 * sum(errs) / max(len(errs), 1),
        coverage=100.0 * covered / max(len(pairs), 1),
        points=len(errs),
    )


def score_ours(
    f: forecast.Forecaster[Any],
    series: Sequence[tuple[float, float]],
    *,
    horizon: float,
    points: Sequence[int],
) -> Score:
    index = {round(t, 3): v for t, v in series}
    mean = sum(v for _, v in series) / len(series)
    wanted = set(points)
    state = f.initial()
    pairs: list[tuple[float, float, float]] = []
    for i, (t, v) in enumerate(series[: max(points, default=-1) + 1]):
        state = f.update(state, t=BASE + t, value=v)
        if i in wanted:
            fc = f.forecast(state, t=BASE + t, horizon=horizon)
            pairs.append((fc.mean, fc.upper, index[round(t + horizon, 3)]))
    return _score(pairs, mean=mean)


def score_dynamo(
    dynamo: Any,
    predictor: str,
    series: Sequence[tuple[float, float]],
    *,
    horizon: float,
    points: Sequence[int],
) -> Score:
    """One predictor per phase of the horizon grid that has evaluation points (the
    planner observes once per interval; a phase is where its intervals start)."""
    index = {round(t, 3): v for t, v in series}
    mean = sum(v for _, v in series) / len(series)
    config = dynamo.planner_config.PlannerConfig(
        mode="agg",
        optimization_target="sla",
        enable_throughput_scaling=True,
        enable_load_scaling=False,
        load_predictor=predictor,
        throughput_adjustment_interval_seconds=round(horizon),
    )
    t0 = series[0][0]
    wanted = set(points)
    first_t = series[points[0]][0] - DYNAMO_WARM_POINTS * horizon
    models: dict[float, Any] = {}
    for i in points:
        models.setdefault(_offset(series[i][0] - t0, horizon), None)
    pairs: list[tuple[float, float, float]] = []
    for i, (t, v) in enumerate(series[: points[-1] + 1]):
        phase = _offset(t - t0, horizon)
        if t < first_t - 1e-9 or phase not in models:
            continue
        model = models[phase]
        if model is None:
            model = models[phase] = dynamo.predictors.LOAD_PREDICTORS[predictor](config)
        model.add_data_point(v)
        predicted = float(model.predict_next())
        if i in wanted:
            pairs.append((predicted, predicted, index[round(t + horizon, 3)]))
    return _score(pairs, mean=mean)


# Every-sample online figures, as the forecast tests use them.


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
    parser.add_argument("--max-points", type=int, default=300)
    parser.add_argument("--no-dynamo", action="store_true", help="only our forecasters")
    args = parser.parse_args(argv)
    if args.max_points < 1:
        print(f"--max-points must be >= 1, got {args.max_points}", file=sys.stderr)
        return 2
    dynamo = None
    if not args.no_dynamo:
        from modelscale.simulate import dynamo_peer  # noqa: PLC0415 (optional package)

        try:
            dynamo = dynamo_peer.load()
        except dynamo_peer.DynamoMissingError as err:
            print(f"{err} (or pass --no-dynamo)", file=sys.stderr)
            return 2
    started = time.perf_counter()
    # (name, series, skip, every sample): the hour-long Azure traces are scored at every
    # sample; the 14-day servegen ones on the horizon grid (cost of Dynamo's ARIMA and
    # Prophet, which refit per step).
    traces: list[tuple[str, list[tuple[float, float]], float, bool]] = []
    for path in sorted(args.traces.glob("azure2023_*.csv.gz")):
        traces.append((path.name.split(".")[0], azure_series(path), 600.0, True))
    for path in sorted(args.traces.glob("servegen_*.csv.gz")):
        traces.append((path.name.split(".")[0], servegen_series(path), 86400.0, False))
    if not traces:
        print(f"no traces in {args.traces}", file=sys.stderr)
        return 1
    ours = list(forecast.FORECASTERS)
    theirs = [] if dynamo is None else ["constant", "arima", "kalman", "prophet"]
    columns = ours + [f"dyn-{p}" for p in theirs]
    head = f"{'trace':<38} {'horizon':>7} {'points':>6} " + " ".join(f"{c:>12}" for c in columns)
    mape_rows: list[str] = []
    cover_rows: list[str] = []
    for name, series, skip, every_sample in traces:
        for h in HORIZONS:
            points = evaluation_points(
                series, horizon=h, skip=skip, max_points=args.max_points, every_sample=every_sample
            )
            if not points:
                continue
            scores = [
                score_ours(forecast.FORECASTERS[n], series, horizon=h, points=points) for n in ours
            ]
            scores += [score_dynamo(dynamo, p, series, horizon=h, points=points) for p in theirs]
            lead = f"{name:<38} {h / 60:>5.0f} m {scores[0].points:>6} "
            mape_rows.append(lead + " ".join(f"{sc.mape:>12.1f}" for sc in scores))
            cover_rows.append(lead + " ".join(f"{sc.coverage:>11.1f}%" for sc in scores))
    version = "" if dynamo is None else f" (dyn-*: Dynamo {dynamo.version} load predictors)"
    print(f"MAPE % of the forecast (lower is better){version}")
    print(head)
    print("-" * len(head))
    print("\n".join(mape_rows))
    print()
    print("Coverage: share of actuals at or below what each plans for (ours: upper bound,")
    print("nominal 95 %; Dynamo's: its forecast, the planner adds no headroom)")
    print(head)
    print("-" * len(head))
    print("\n".join(cover_rows))
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
