"""Run every policy on one trace with comparable settings; the CLI and the benchmark use it.

Every policy is configured from the same measured per-replica capacity: the output
tokens/s one warm replica sustains within the SLO for the trace's request mix, found by a
simulated load test (`loadtest.measure`), as a user would size a deployment. Token-rate
policies get target = capacity x 0.8 (for ours, `headroom` = 0.8 on the same capacity);
Knative gets the load test's concurrency as its container-concurrency target, with its
own default utilisation 0.7. `scale` multiplies a baseline's target (and `headroom`
replaces ours) for the sweep.
"""

from __future__ import annotations

from dataclasses import dataclass

from modelscale.autoscaling.types import PolicyConfig
from modelscale.simulate import baselines, engine, figures, loadtest, oracle, ours
from modelscale.simulate.engine import Policy, RunResult
from modelscale.simulate.figures import Figures
from modelscale.simulate.replica import ReplicaParams, Slo
from modelscale.simulate.trace import Trace

POLICIES = ("modelscale", "hpa", "keda", "knative-kpa", "aibrix-apa", "static-peak", "oracle")
DEFAULT_UTILISATION = 0.8
MAX_REPLICAS = 256


@dataclass
class Setup:
    trace: Trace
    params: ReplicaParams
    slo: Slo
    dt: float
    capacity_tokens: float  # output tokens/s per warm replica within the SLO
    capacity_concurrency: float
    oracle: oracle.OracleRun
    recommend: ours.RecommendFn | None = None
    static_replicas: int = 0  # fewest constant replicas meeting the SLO in every window

    @property
    def initial_replicas(self) -> int:
        """Every policy starts with what the oracle runs at t=0: sized (and warm) for the
        trace's first L+W seconds, as a service already running would be."""
        return self.oracle.policy.replicas_at(0.0)

    @property
    def peak_replicas(self) -> int:
        return int(self.oracle.need.max())


def prepare(
    trace: Trace,
    *,
    params: ReplicaParams | None = None,
    slo: Slo | None = None,
    dt: float = 0.5,
    seed: int = 0,
    recommend: ours.RecommendFn | None = None,
) -> Setup:
    params = params or ReplicaParams()
    slo = slo or Slo()
    cap = loadtest.measure(trace, params=params, slo=slo, seed=seed)
    setup = Setup(
        trace=trace,
        params=params,
        slo=slo,
        dt=dt,
        capacity_tokens=cap.output_tokens_per_s,
        capacity_concurrency=cap.concurrency,
        oracle=oracle.solve(trace, params=params, slo=slo, dt=dt),
        recommend=recommend,
    )
    setup.static_replicas = smallest_static(setup)
    return setup


def smallest_static(setup: Setup) -> int:
    """The constant replica count the trace's peak needs: the fewest (found by bisection,
    up to the oracle's peak) that meet the SLO in every 1-minute window of the replay."""
    lo, hi = 1, setup.peak_replicas
    while lo < hi:
        mid = (lo + hi) // 2
        result = engine.run(
            setup.trace,
            baselines.StaticPeak(replicas=mid),
            params=setup.params,
            initial_replicas=mid,
            dt=setup.dt,
        )
        if figures.window_ok(setup.trace, result, setup.slo).all():
            hi = mid
        else:
            lo = mid + 1
    return lo


def make_policy(
    name: str, setup: Setup, *, scale: float = 1.0, headroom: float | None = None
) -> Policy:
    target = setup.capacity_tokens * DEFAULT_UTILISATION * scale
    if name == "modelscale":
        config = PolicyConfig(
            min_replicas=1,
            max_replicas=MAX_REPLICAS,
            target_tokens_per_replica=setup.capacity_tokens * scale,
            latency_slo_seconds=setup.slo.ttft_s,
            headroom=headroom if headroom is not None else DEFAULT_UTILISATION,
            default_horizon_seconds=setup.params.horizon_s,
            tpot_slo_seconds=setup.slo.tpot_s,
        )
        return ours.Modelscale(config=config, params=setup.params, recommend=setup.recommend)
    if name == "hpa":
        return baselines.Hpa(target_per_pod=target)
    if name == "keda":
        return baselines.Keda(target_per_pod=target)
    if name == "knative-kpa":
        return baselines.KnativeKpa(target_concurrency=setup.capacity_concurrency * scale)
    if name == "aibrix-apa":
        return baselines.AibrixApa(target_per_pod=target)
    if name == "static-peak":
        return baselines.StaticPeak(replicas=setup.static_replicas)
    if name == "oracle":
        return setup.oracle.policy
    raise ValueError(f"unknown policy {name!r}; choose from {', '.join(POLICIES)}")


def run_policy(setup: Setup, policy: Policy) -> RunResult:
    if policy.name == "oracle":
        return setup.oracle.result
    initial = setup.initial_replicas
    if isinstance(policy, baselines.StaticPeak):
        initial = policy.replicas
    return engine.run(
        setup.trace,
        policy,
        params=setup.params,
        initial_replicas=initial,
        max_replicas=MAX_REPLICAS,
        dt=setup.dt,
    )


def evaluate(setup: Setup, result: RunResult) -> Figures:
    return figures.compute(
        setup.trace,
        result,
        setup.slo,
        oracle_replica_seconds=setup.oracle.result.replica_seconds,
    )


def run_all(
    setup: Setup, names: tuple[str, ...] | list[str] = POLICIES
) -> dict[str, tuple[RunResult, Figures]]:
    out: dict[str, tuple[RunResult, Figures]] = {}
    for name in names:
        result = run_policy(setup, make_policy(name, setup))
        out[name] = (result, evaluate(setup, result))
    return out
