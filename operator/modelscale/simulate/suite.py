"""Run every policy on one trace under the same conditions; the CLI and the benchmark use it.

Same conditions for all:

* the same start: every policy (static excepted, which is its count) starts with the
  replicas a running service would have for the trace's first minute of load: that
  minute's output tokens/s over the load-tested target (`first_minute_replicas`), or what
  the fluid model needs for it if more. Never the oracle's count, which knows the future;
* the same sizing: peers are configured from one simulated load test of a warm replica
  (`loadtest.measure`: the output tokens/s and concurrency it sustains within the SLO), as
  a user sizes a deployment; token-rate peers target 0.8 x that capacity;
* the same gate, in the policy-vs-policy table ("gated"): every peer is wrapped so its new
  replicas take traffic only once warm, as ours and the oracle do. The system-vs-system
  table ("as_deployed") runs peers as their users do: traffic from container-ready;
* the same tuning budget: one multiplier per policy on its own target (`SWEEP`), the same
  nine values for everyone.

Ours at its defaults is what a user gets who gives only the SLO: `PolicyConfig` with the
SLO fields and the API's default per-replica target, nothing from the load test. In the
sweep its per-replica target is the load-tested capacity x the multiplier, like the peers'.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from modelscale.api.v1alpha1 import Targets
from modelscale.autoscaling.types import PolicyConfig
from modelscale.simulate import (
    baselines,
    bound,
    engine,
    figures,
    loadtest,
    oracle,
    ours,
    peers,
    present,
)
from modelscale.simulate.engine import Policy, RunResult, View
from modelscale.simulate.figures import Figures
from modelscale.simulate.oracle import OracleRun
from modelscale.simulate.replica import ReplicaParams, Slo
from modelscale.simulate.trace import Trace

OURS = "modelscale"
# Every peer the registry knows (`modelscale simulate --policy` accepts each), and the ones
# a default run shows: one per project on its token-rate or concurrency metric, the
# LLM-metric variants that behave sanely, and Dynamo's planner with its cheapest predictor
# (ARIMA refits as history grows: minutes per run; ask for it with --policy).
PEER_NAMES: tuple[str, ...] = peers.PEER_NAMES
DEFAULT_PEERS: tuple[str, ...] = (
    "hpa",
    "hpa-running",
    "keda",
    "knative-kpa",
    "aibrix-apa",
    "aibrix-apa-kv",
    "dynamo-kalman",
)
Sizing = peers.Sizing
STATIC = "static-peak"
ORACLE = "oracle"
POLICIES = (OURS, *PEER_NAMES, STATIC, ORACLE)
DEFAULT_POLICIES = (OURS, *DEFAULT_PEERS, STATIC, ORACLE)
DEFAULT_UTILISATION = 0.8
MAX_REPLICAS = 256
# One sweep grid for everyone: a multiplier on each policy's own target.
SWEEP = (0.5, 0.625, 0.75, 0.875, 1.0, 1.125, 1.25, 1.375, 1.5)
TABLES = ("gated", "as_deployed")
# The SLO the benchmark and `modelscale simulate` use unless told otherwise: P99 TTFT 2 s
# plus 0.5 s per 1,000 prompt tokens, P99 TPOT 0.1 s (docs/benchmarks.md says why).
DEFAULT_SLO = Slo(ttft_s=2.0, tpot_s=0.1, ttft_per_1k_input_s=0.5)


@dataclass
class Setup:
    trace: Trace
    params: ReplicaParams
    slo: Slo
    dt: float
    feasibility: bound.Feasibility
    lower_bound: bound.LowerBound | None = None
    sizing: Sizing = field(default_factory=lambda: Sizing(1.0, 1.0, 1.0, 0.5))
    oracle: OracleRun | None = None
    initial_replicas: int = 1
    static_replicas: int = 0  # fewest constant replicas meeting the 99 % window target
    recommend: ours.RecommendFn | None = None
    seed: int = 0  # what this setup's trace and load test were drawn with
    # The static search's replay at `static_replicas`: the static-peak row reuses it.
    static_run: RunResult | None = None

    @property
    def capacity_tokens(self) -> float:
        return self.sizing.tokens_per_s

    @property
    def oracle_run(self) -> OracleRun:
        if self.oracle is None:
            raise ValueError("the SLO is not attainable on this trace: nothing was scored")
        return self.oracle


class Gated:
    """A peer behind modelscale's readiness gate: new replicas get traffic once warm."""

    warmup_gate = True

    def __init__(self, inner: Policy) -> None:
        self.inner = inner
        self.name = inner.name
        self.interval_s = inner.interval_s

    def decide(self, view: View) -> int:
        return self.inner.decide(view)


def prepare(
    trace: Trace,
    *,
    params: ReplicaParams | None = None,
    slo: Slo | None = None,
    dt: float = 0.5,
    seed: int = 0,
    recommend: ours.RecommendFn | None = None,
) -> Setup:
    """Check the SLO is attainable, then size, bound and solve the oracle. When it is not
    attainable the setup carries only the feasibility verdict (nothing is scored). Raises
    `bound.InfeasibleCapacityError` when one replica cannot serve the mean request at all."""
    params = params or ReplicaParams()
    slo = slo or DEFAULT_SLO
    feas = bound.feasibility(trace, params=params, slo=slo)
    setup = Setup(trace=trace, params=params, slo=slo, dt=dt, feasibility=feas, seed=seed)
    if not feas.feasible:
        return setup
    fluid_start = bound.initial_replicas(trace, params=params, slo=slo, max_replicas=MAX_REPLICAS)
    cap = loadtest.measure(trace, params=params, slo=slo, seed=seed)
    if cap.output_tokens_per_s <= 0:
        raise bound.InfeasibleCapacityError(
            "the load test found no rate at which one replica meets the SLO; "
            "raise --slo-ttft, --slo-ttft-per-1k or --slo-tpot"
        )
    setup.sizing = Sizing(
        tokens_per_s=cap.output_tokens_per_s,
        concurrency=max(cap.concurrency, 1e-6),
        running_per_replica=max(cap.running, 1e-6),
        kv_usage=min(max(cap.kv_usage, 1e-6), 1.0),
    )
    setup.initial_replicas = max(fluid_start, first_minute_replicas(trace, setup.sizing))
    setup.lower_bound = bound.lower_bound(trace, params=params, slo=slo)
    setup.oracle = oracle.solve(
        trace, params=params, slo=slo, dt=dt, max_replicas=MAX_REPLICAS, skip=feas.unattainable
    )
    setup.recommend = recommend
    setup.static_replicas = smallest_static(setup)
    setup.oracle = oracle.no_costlier_than_constant(
        setup.oracle,
        trace,
        replicas=setup.static_replicas,
        params=params,
        slo=slo,
        dt=dt,
        max_replicas=MAX_REPLICAS,
    )
    return setup


def first_minute_replicas(trace: Trace, sizing: Sizing) -> int:
    """The replicas a running service is sized with for the trace's first minute of load:
    its output tokens/s over the load-tested per-replica target (0.8 x capacity), the
    sizing every peer is configured with. Only the first minute is looked at."""
    first = trace.arrival_s < min(figures.WINDOW_S, trace.duration_s)
    span = min(figures.WINDOW_S, trace.duration_s)
    rate = float(trace.output_tokens[first].sum()) / span if span > 0 else 0.0
    per_replica = sizing.tokens_per_s * DEFAULT_UTILISATION
    return min(MAX_REPLICAS, max(1, math.ceil(rate / per_replica)))


def smallest_static(setup: Setup) -> int:
    """The fewest constant replicas that meet the 99 % window target, found by doubling
    from the fluid peak and then bisection (not capped at the oracle's peak); MAX_REPLICAS
    when even that many do not. The replay at the answer is kept in `setup.static_run`
    (every answer was replayed by the search): the static-peak row does not replay it."""
    runs: dict[int, RunResult] = {}

    def meets(replicas: int) -> bool:
        # The same replay as `run_policy` gives static-peak (a static count draws no
        # start-up times, so the seed changes nothing).
        runs[replicas] = result = run_policy(setup, baselines.StaticPeak(replicas=replicas))
        scores = figures.window_scores(setup.trace, result, setup.slo)
        return scores.attainment >= figures.TARGET_WINDOWS

    fluid = bound.fluid_replicas(
        setup.trace, params=setup.params, slo=setup.slo, max_replicas=MAX_REPLICAS
    )
    hi = max(1, int(fluid.max()))
    lo = 1
    while not meets(hi):
        if hi >= MAX_REPLICAS:
            setup.static_run = runs[MAX_REPLICAS]
            return MAX_REPLICAS
        lo, hi = hi + 1, min(MAX_REPLICAS, 2 * hi)
    while lo < hi:
        mid = (lo + hi) // 2
        if meets(mid):
            hi = mid
        else:
            lo = mid + 1
    setup.static_run = runs[lo]
    return lo


def make_peer(name: str, *, sizing: Sizing, scale: float = 1.0) -> Policy:
    """A peer as its users configure it from the load test; `scale` multiplies its
    target (its one sweep knob). The registry (`simulate/peers.py`) builds it."""
    return peers.build(name, sizing=sizing, scale=scale)


def unavailable(name: str) -> str | None:
    """Why `name` cannot run here (None: it can): Dynamo's planner needs the optional
    `peers` extra."""
    if not name.startswith("dynamo-"):
        return None
    try:
        from modelscale.simulate import dynamo_peer  # noqa: PLC0415 (optional package)

        dynamo_peer.load()
    except Exception as err:  # the package is missing or its import chain breaks
        return f"{name} needs NVIDIA Dynamo's planner ({err})"
    return None


def default_policies() -> tuple[tuple[str, ...], list[str]]:
    """The policies a run without --policy shows that can run here, and a line for each
    that cannot (and why)."""
    notes = [reason for name in DEFAULT_POLICIES if (reason := unavailable(name))]
    names = tuple(name for name in DEFAULT_POLICIES if unavailable(name) is None)
    return names, notes


def ours_config(setup: Setup, *, scale: float | None = None) -> PolicyConfig:
    """Ours as configured by a user who gives only the SLO (scale None), or at sweep point
    `scale`: the load per replica it plans for x `scale`, as each peer's target is. Before
    the pods' metrics have located the capacity that load is the target (the load-tested
    capacity x `scale`, x the headroom); after, it is the learned capacity x
    `learned_headroom`, so the sweep sets that share to `scale` too. With the prior alone
    scaled (until 2026-12-04) the sweep moved ours only until it had learned: on
    servegen-m-large its nine points spanned 1.03-1.16x the oracle and 95.8-97.5 % of
    windows, while the HPA's spanned 0.85-2.33x."""
    target = (
        Targets().tokens_per_second_per_replica
        if scale is None
        else setup.sizing.tokens_per_s * scale
    )
    config = PolicyConfig(
        min_replicas=1,
        max_replicas=MAX_REPLICAS,
        target_tokens_per_replica=target,
        latency_slo_seconds=setup.slo.ttft_s,
        tpot_slo_seconds=setup.slo.tpot_s,
        ttft_slo_per_1k_prompt_seconds=setup.slo.ttft_per_1k_input_s,
        pass_interval_seconds=ours.Modelscale.interval_s,
    )
    return config if scale is None else replace(config, learned_headroom=scale)


def make_policy(
    name: str, setup: Setup, *, scale: float | None = None, gated: bool = True
) -> Policy:
    """`name` at its default settings (scale None) or at sweep multiplier `scale`; peers
    wrapped behind the readiness gate when `gated`."""
    if name == OURS:
        return ours.Modelscale(
            config=ours_config(setup, scale=scale), params=setup.params, recommend=setup.recommend
        )
    if name in PEER_NAMES:
        peer = make_peer(name, sizing=setup.sizing, scale=1.0 if scale is None else scale)
        return Gated(peer) if gated else peer
    if name == STATIC:
        return baselines.StaticPeak(replicas=setup.static_replicas)
    if name == ORACLE:
        return setup.oracle_run.policy
    raise ValueError(f"unknown policy {name!r}; choose from {', '.join(POLICIES)}")


def run_policy(setup: Setup, policy: Policy) -> RunResult:
    if policy.name == ORACLE:
        return setup.oracle_run.result
    initial = setup.initial_replicas
    if isinstance(policy, baselines.StaticPeak):
        cached = setup.static_run
        if cached is not None and policy.replicas == setup.static_replicas:
            return cached
        initial = policy.replicas
    return engine.run(
        setup.trace,
        policy,
        params=setup.params,
        initial_replicas=initial,
        max_replicas=MAX_REPLICAS,
        dt=setup.dt,
        seed=setup.seed,
        slo=setup.slo,
    )


def evaluate(setup: Setup, result: RunResult) -> Figures:
    return figures.compute(
        setup.trace,
        result,
        setup.slo,
        oracle_replica_seconds=setup.oracle_run.result.replica_seconds,
    )


def run_tables(
    setup: Setup, names: tuple[str, ...] | list[str] | None = None
) -> dict[str, dict[str, tuple[RunResult, Figures]]]:
    """Both tables at default settings: {"gated": {policy: ...}, "as_deployed": {...}}.
    Policies that are gated anyway (ours, static, oracle) run once and appear in both.
    Empty tables when the SLO is not attainable."""
    out: dict[str, dict[str, tuple[RunResult, Figures]]] = {t: {} for t in TABLES}
    if names is None:
        names = default_policies()[0]
    if not setup.feasibility.feasible:
        return out
    for name in names:
        for table in TABLES if name in PEER_NAMES else TABLES[:1]:
            result = run_policy(setup, make_policy(name, setup, gated=table == "gated"))
            out[table][name] = (result, evaluate(setup, result))
        if name not in PEER_NAMES:
            out["as_deployed"][name] = out["gated"][name]
    return out


@dataclass(frozen=True)
class SweepPoint:
    policy: str
    table: str
    scale: float
    figures: Figures

    @property
    def setting(self) -> str:
        return f"target x{self.scale:g}"


def sweep_tasks(names: tuple[str, ...] | list[str] | None = None) -> list[tuple[str, str, float]]:
    """(policy, table, multiplier) of every sweep run: each peer in both tables, ours once
    (it is gated as deployed); static and the oracle have no multiplier."""
    out: list[tuple[str, str, float]] = []
    for name in default_policies()[0] if names is None else names:
        if name == OURS:
            out += [(name, "gated", s) for s in SWEEP]
        elif name in PEER_NAMES:
            out += [(name, t, s) for t in TABLES for s in SWEEP]
    return out


def run_sweep_task(setup: Setup, task: tuple[str, str, float]) -> SweepPoint:
    name, table, scale = task
    policy = make_policy(name, setup, scale=scale, gated=table == "gated")
    return SweepPoint(name, table, scale, evaluate(setup, run_policy(setup, policy)))


def best_at_target(
    setup: Setup,
    points: list[SweepPoint],
    defaults: dict[str, dict[str, tuple[RunResult, Figures]]],
) -> dict[str, dict[str, dict[str, float | str | None]]]:
    """Per table and policy, the cheapest sweep setting that meets the 99 % window target
    (replica_seconds None when none does, with the best attainment reached). Static and
    the oracle, which have no multiplier, enter at their one setting."""
    out: dict[str, dict[str, dict[str, float | str | None]]] = {t: {} for t in TABLES}
    for table in TABLES:
        names = dict.fromkeys(
            [p.policy for p in points if p.table == table or p.policy == OURS]
            + [n for n in defaults[table] if n in (STATIC, ORACLE)]
        )
        for name in names:
            cands = [
                (p.setting, p.figures)
                for p in points
                if p.policy == name and (p.table == table or name == OURS)
            ]
            if name in (STATIC, ORACLE):
                label = f"replicas {setup.static_replicas}" if name == STATIC else "schedule"
                cands = [(label, defaults[table][name][1])]
            ok = [c for c in cands if c[1].slo_attainment_windows >= figures.TARGET_WINDOWS]
            if ok:
                setting, f = min(ok, key=lambda c: c[1].replica_seconds)
                out[table][name] = {
                    "replica_seconds": f.replica_seconds,
                    "slo_attainment_windows": f.slo_attainment_windows,
                    "setting": setting,
                }
            else:
                setting, f = max(cands, key=lambda c: c[1].slo_attainment_windows)
                out[table][name] = {
                    "replica_seconds": None,
                    "slo_attainment_windows": f.slo_attainment_windows,
                    "setting": setting,
                }
    return out


def present_replay(setup: Setup) -> Callable[[float], present.Point]:
    """Replays of the present-knowing reference (`simulate/present.py`) at a margin: every
    15 s the fluid need of the last minute's requests at their mix
    (`bound.trailing_fluid_load`), from the same start and behind the same gate as
    everyone, kept through dips shorter than one start-up horizon."""
    times = np.arange(0.0, setup.trace.duration_s + present.INTERVAL_S, present.INTERVAL_S)
    need = bound.trailing_fluid_load(setup.trace, params=setup.params, slo=setup.slo, times=times)

    def replay(margin: float) -> present.Point:
        policy = present.PresentOracle(
            times=times, need=need, margin=margin, hold_s=setup.params.horizon_s
        )
        f = evaluate(setup, run_policy(setup, policy))
        return present.Point(
            margin=margin,
            attainment=f.slo_attainment_windows,
            replica_seconds=f.replica_seconds,
            meets=f.slo_attainment_windows >= figures.TARGET_WINDOWS,
        )

    return replay


def present_reference(setup: Setup) -> present.Search:
    """The present-knowing reference at the cheapest margin that meets the 99 % window
    target on this trace, found in hindsight."""
    return present.cheapest_margin(present_replay(setup))


def run_all(
    setup: Setup, names: tuple[str, ...] | list[str] = POLICIES
) -> dict[str, tuple[RunResult, Figures]]:
    """The system-vs-system table alone (peers as deployed), as before the two tables."""
    return run_tables(setup, names)["as_deployed"]
