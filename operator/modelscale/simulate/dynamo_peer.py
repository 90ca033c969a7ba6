"""NVIDIA Dynamo's planner as a peer, run from its own package (`ai-dynamo` 1.6.1).

What runs is Dynamo's code, not a re-implementation:

- its load predictors, `dynamo.planner.core.load.predictors.LOAD_PREDICTORS` (constant,
  ARIMA via pmdarima, Prophet, Kalman via filterpy), one per observed series (request
  count, mean input length, mean output length), as its builtin PREDICT plugin keeps them;
- its throughput-based replica calculation for an aggregated deployment,
  `dynamo.planner.core.throughput_scaling.ThroughputScalingMixin._throughput_agg`
  (ceil(demand rps / engine rps), the per-observation change cap
  `max_throughput_scaling_replicas` = 8, the endpoint floor, the hold while replicas are
  still starting), on a `PlannerConfig` with the package's defaults.

What the simulator supplies in place of the parts that need a cluster:

- the traffic observation the planner pulls from Prometheus every
  `throughput_adjustment_interval_seconds` (default 180 s): the frontend's request count
  in the interval and the mean input and output lengths of the requests that finished in
  it (`frontend_traffic`);
- the perf model's engine capacity (`find_engine_capacity_rps`): requests/s one replica
  sustains within the SLA = the load test's output tokens/s per replica (times the sweep's
  `scale`) divided by the predicted output length. Dynamo gets this from its pre-deployment
  profiling; here it comes from the same load test every peer is sized by;
- worker counts: ready = containers past their readiness probe, pending = created but not
  yet ready.

Import chain. `import dynamo.planner.core.load.predictors` runs `dynamo/planner/__init__.py`,
which imports the connectors, `dynamo.planner.core` (state machine) and
`dynamo.planner.core.perf_model.ais_adapter`, which needs `aisimulate_core`: the package
`aisimulate==0.13.0` that `ai-dynamo` requires is a stub on PyPI whose build downloads the
real wheel from NVIDIA's own index, which this machine cannot reach, so that import fails
with `ModuleNotFoundError: No module named 'aisimulate_core'`. When it does, `load()` puts
bare package objects for `dynamo.planner`, `dynamo.planner.core` and
`dynamo.planner.core.load` in `sys.modules` (their `__path__` the installed directories,
their `__init__.py` not run) and imports the predictor, config, types and throughput
modules themselves, unmodified, from the installed package. `LOADED_VIA` says which way.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import math
import os
import sys
import types
from dataclasses import dataclass
from typing import Any

import numpy as np

from modelscale.simulate.engine import SCRAPE_INTERVAL_S, View

INSTALL_HINT = "pip install -e '.[peers]' && pip install --no-deps 'ai-dynamo==1.6.1'"
_BARE_PACKAGES = ("dynamo.planner", "dynamo.planner.core", "dynamo.planner.core.load")
# vLLM's default max_num_batched_tokens; the agg path only checks that one is known.
_MAX_NUM_BATCHED_TOKENS = 8192

LOADED_VIA: str | None = None  # "package" or "bare-packages" once load() succeeded


class DynamoMissingError(RuntimeError):
    """The optional `ai-dynamo` package (or a dependency of its planner) is not installed."""


@dataclass(frozen=True)
class Dynamo:
    """The parts of Dynamo's planner the peer runs."""

    predictors: types.ModuleType  # dynamo.planner.core.load.predictors
    throughput: types.ModuleType  # dynamo.planner.core.throughput_scaling
    planner_config: types.ModuleType  # dynamo.planner.config.planner_config
    core_types: types.ModuleType  # dynamo.planner.core.types
    version: str


_LOADED: Dynamo | None = None


def _import_parts() -> Dynamo:
    """Import the planner modules. The predictors module calls Dynamo's
    `configure_dynamo_logging()` at import, which replaces the root logger's handlers
    with Dynamo's own: the caller's logging setup is put back afterwards."""
    from importlib.metadata import version  # noqa: PLC0415

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        parts = Dynamo(
            predictors=importlib.import_module("dynamo.planner.core.load.predictors"),
            throughput=importlib.import_module("dynamo.planner.core.throughput_scaling"),
            planner_config=importlib.import_module("dynamo.planner.config.planner_config"),
            core_types=importlib.import_module("dynamo.planner.core.types"),
            version=version("ai-dynamo"),
        )
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    # Per-tick INFO and advice about profiling the simulator does not use ("no AIC
    # interpolation set"): errors only.
    for name in ("dynamo", "prophet", "cmdstanpy"):
        logging.getLogger(name).setLevel(logging.ERROR)
    return parts


def load() -> Dynamo:
    """Import Dynamo's planner parts (once); `DynamoMissingError` says what to install."""
    global _LOADED, LOADED_VIA
    if _LOADED is not None:
        return _LOADED
    if importlib.util.find_spec("dynamo") is None:
        raise DynamoMissingError(f"dynamo-* peers need NVIDIA Dynamo's planner: {INSTALL_HINT}")
    try:
        if importlib.util.find_spec("aisimulate_core") is not None:
            _LOADED, LOADED_VIA = _import_parts(), "package"
            return _LOADED
        root = next(iter(importlib.import_module("dynamo").__path__))
        for name in _BARE_PACKAGES:
            if name not in sys.modules:
                module = types.ModuleType(name)
                module.__path__ = [os.path.join(root, *name.split(".")[1:])]
                sys.modules[name] = module
        _LOADED, LOADED_VIA = _import_parts(), "bare-packages"
        return _LOADED
    except ImportError as err:
        raise DynamoMissingError(
            f"dynamo-* peers: Dynamo's planner does not import ({err}); {INSTALL_HINT}"
        ) from err


# ------------------------------------------------------------------------- observation


@dataclass(frozen=True)
class Traffic:
    """One interval's traffic as Dynamo's frontend metrics show it."""

    duration_s: float
    num_req: float  # requests received in the interval
    isl: float  # mean input tokens of requests finished in it (NaN if none)
    osl: float  # mean output tokens of requests finished in it (NaN if none)


def frontend_traffic(view: View, *, window_s: float) -> Traffic:
    """increase(dynamo_frontend_requests_total[window]) and the input/output-length
    histogram means over the same window, at the newest scrape.

    Neither is a View method yet, so this reads the engine's own record, as `View.p99`
    does: with a per-request record (an in-memory trace) the requests that arrived in the
    window and the lengths of those that finished in it; with a streamed engine that
    keeps per-window arrival counts and scraped token counters instead, the arrivals of
    the scoring windows inside the interval and the prompt/output tokens the counters
    gained per request."""
    e: Any = view._e
    if hasattr(e, "trace") and hasattr(e, "finish"):
        return _traffic_from_requests(e, now=view.now, window_s=window_s)
    if hasattr(e, "arrived") and hasattr(e, "scrape_out"):
        return _traffic_from_counters(e, now=view.now, window_s=window_s)
    raise TypeError("dynamo-*: this engine's View reports no request counts for the planner")


def _traffic_from_requests(e: Any, *, now: float, window_s: float) -> Traffic:
    s = now - SCRAPE_INTERVAL_S
    arrivals = e.trace.arrival_s
    lo = int(np.searchsorted(arrivals, s - window_s, side="right"))
    hi = int(np.searchsorted(arrivals, s, side="right"))
    first = int(np.searchsorted(arrivals, s - window_s - 3600.0))
    done = (e.finish[first:hi] > s - window_s) & (e.finish[first:hi] <= s)
    if done.any():
        isl = float(e.trace.input_tokens[first:hi][done].mean())
        osl = float(e.trace.output_tokens[first:hi][done].mean())
    else:
        isl = osl = math.nan
    return Traffic(duration_s=window_s, num_req=float(hi - lo), isl=isl, osl=osl)


def _traffic_from_counters(e: Any, *, now: float, window_s: float) -> Traffic:
    width = float(e.window_s)
    k1 = min(int(now // width), len(e.arrived))
    k0 = max(0, k1 - round(window_s / width))
    num_req = float(np.sum(e.arrived[k0:k1]))
    if not e.scrape_t or num_req == 0:
        return Traffic(duration_s=window_s, num_req=num_req, isl=math.nan, osl=math.nan)
    s = e.scrape_t[-1]
    d_in = e.scrape_in[-1] - e.counter_at(e.scrape_in, s - window_s)
    d_out = e.scrape_out[-1] - e.counter_at(e.scrape_out, s - window_s)
    return Traffic(duration_s=window_s, num_req=num_req, isl=d_in / num_req, osl=d_out / num_req)


# ------------------------------------------------------------------------- the peer


@dataclass(frozen=True)
class _Capacity:
    """What Dynamo's perf model answers `find_engine_capacity_rps` with."""

    rps: float
    ttft_ms: float
    itl_ms: float
    eligible: bool


class _SizedPerfModel:
    """Engine capacity from the load test instead of Dynamo's profiling sweep."""

    def __init__(self, *, tokens_per_replica: float) -> None:
        self.tokens_per_replica = tokens_per_replica

    def find_engine_capacity_rps(self, *, osl: float, **_: Any) -> _Capacity:
        rps = self.tokens_per_replica / max(1.0, osl)
        return _Capacity(rps=rps, ttft_ms=0.0, itl_ms=0.0, eligible=True)


class DynamoPlanner:
    """Dynamo's SLA planner (`optimization_target="sla"`, throughput-based scaling,
    aggregated mode) with one of its load predictors, every
    `throughput_adjustment_interval_seconds`."""

    warmup_gate = False

    def __init__(
        self,
        *,
        predictor: str,
        tokens_per_replica: float,
        name: str | None = None,
        ttft_ms: float = 2000.0,
        itl_ms: float = 100.0,
    ) -> None:
        if tokens_per_replica <= 0:
            raise ValueError(f"dynamo-{predictor}: capacity must be > 0, got {tokens_per_replica}")
        d = load()
        self.dynamo = d
        self.name = name or f"dynamo-{predictor}"
        # The package's defaults, in the mode whose throughput path uses the predictors:
        # optimization_target="sla" (the default "throughput" target switches to reactive
        # load-based scaling on engine forward-pass metrics), aggregated workers.
        self.config = d.planner_config.PlannerConfig(
            mode="agg",
            optimization_target="sla",
            enable_throughput_scaling=True,
            enable_load_scaling=False,
            load_predictor=predictor,
            ttft_ms=ttft_ms,
            itl_ms=itl_ms,
        )
        self.interval_s = float(self.config.throughput_adjustment_interval_seconds)
        make = d.predictors.LOAD_PREDICTORS[predictor]
        self.num_req_predictor = make(self.config)
        self.isl_predictor = make(self.config)
        self.osl_predictor = make(self.config)
        self._seen_live_traffic = False
        self._last_isl: float | None = None
        self._last_osl: float | None = None
        self.state = _agg_state(
            d, config=self.config, perf_model=_SizedPerfModel(tokens_per_replica=tokens_per_replica)
        )
        self.target: int | None = None
        self.last_prediction: tuple[float, float, float] | None = None

    def observe(self, traffic: Traffic) -> None:
        """The builtin PREDICT plugin's `_observe_load` (plugins/builtins/local_planner.py):
        request count always; lengths carried forward over an idle interval."""
        self.num_req_predictor.add_data_point(traffic.num_req)
        isl, osl = traffic.isl, traffic.osl
        if traffic.num_req > 0:
            self._seen_live_traffic = True
            if math.isfinite(isl):
                self._last_isl = isl
            if math.isfinite(osl):
                self._last_osl = osl
        if traffic.num_req == 0 and self._seen_live_traffic:
            isl = self._last_isl if self._last_isl is not None else 0.0
            osl = self._last_osl if self._last_osl is not None else 0.0
        if math.isfinite(isl):
            self.isl_predictor.add_data_point(isl)
        if math.isfinite(osl):
            self.osl_predictor.add_data_point(osl)

    def plan(self, *, traffic: Traffic, ready: int, pending: int) -> int | None:
        """One throughput tick: observe, predict, and run Dynamo's agg replica
        calculation. Returns the new replica target, or None to keep the current one."""
        idle = traffic.num_req == 0
        if not idle and not (math.isfinite(traffic.isl) and math.isfinite(traffic.osl)):
            return None  # "Metrics contain None or NaN values, skipping"
        if idle:
            traffic = Traffic(duration_s=traffic.duration_s, num_req=0.0, isl=0.0, osl=0.0)
        self.observe(traffic)
        nr = float(self.num_req_predictor.predict_next())
        isl = float(self.isl_predictor.predict_next())
        osl = float(self.osl_predictor.predict_next())
        self.last_prediction = (nr, isl, osl)
        self.state._num_d_workers = ready
        self.state._pending_num_d = pending
        decision = self.state._throughput_agg(nr / traffic.duration_s, isl, osl, None)
        if decision is None or decision.num_decode is None:
            return None
        return int(decision.num_decode)

    def decide(self, view: View) -> int:
        if self.target is None:
            self.target = view.created
        ready = min(view.container_ready, view.created)
        new = self.plan(
            traffic=frontend_traffic(view, window_s=self.interval_s),
            ready=ready,
            pending=view.created - ready,
        )
        if new is not None:
            self.target = new
        return max(1, self.target)


def _agg_state(d: Dynamo, *, config: Any, perf_model: _SizedPerfModel) -> Any:
    """A host for Dynamo's `ThroughputScalingMixin` with the state its agg path reads.
    Worker capabilities carry no per-replica GPU cost, for which the state machine's
    budget guards (`_guard_single_throughput_budget`) return the desired count unchanged."""

    class AggState(d.throughput.ThroughputScalingMixin):  # type: ignore[name-defined,misc]
        def __init__(self) -> None:
            self._config = config
            self._capabilities = types.SimpleNamespace(
                decode=types.SimpleNamespace(
                    max_num_batched_tokens=_MAX_NUM_BATCHED_TOKENS,
                    resolved_gpu_cost_per_replica=None,
                ),
                prefill=None,
            )
            self._agg_regression = perf_model
            self._num_p_workers = 0
            self._num_d_workers = 0
            self._pending_num_p = 0
            self._pending_num_d = 0
            self._throughput_lower_bound_d: int | None = None
            for field in (
                "predicted_num_req",
                "predicted_isl",
                "predicted_osl",
                "predicted_kv_hit_rate",
                "engine_rps_prefill",
                "engine_rps_decode",
                "throughput_reason",
                "throughput_reason_prefill",
                "throughput_reason_decode",
            ):
                setattr(self, f"_diag_{field}", None)

        def _current_decode_accept_length(self) -> float:
            return 1.0  # no speculative decoding

        def _fit_single_throughput_ceiling(
            self, desired: int, component: str
        ) -> tuple[int, str | None]:
            return desired, None

        def _apply_single_scaling_budget(
            self, desired: int, component: str
        ) -> tuple[int, str | None]:
            return desired, None

        def _pending_startup(self, component: str) -> int:
            return self._pending_num_p if component == "prefill" else self._pending_num_d

    return AggState()
