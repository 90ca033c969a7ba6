"""What one observation says about demand and latency, for the recommender.

- `work_rate`: demand in output-token equivalents at the usual prompt/output mix;
- `draining`: the token rate is a backlog being served, not new demand;
- `drained_recently`: the rate window still holds a backlog served since;
- `queue_grew`: the warmed pods serve less than arrives;
- `unserved_work`: demand a saturated fleet queues instead of serving;
- `zero_demand`: nothing served, prefilled or waiting over the whole rate window;
- `latencies` / `pressure`: the watched P99s, and the worst as a share of its SLO;
- `latency_margin_short`: why a scale-down would be unsafe now;
- `latency_slo`: the P99 target, length-aware when the spec gives an allowance.
Pure: no clock, no I/O.
"""

from __future__ import annotations

import math

from modelscale.autoscaling.state import PolicyModel
from modelscale.autoscaling.types import Observation, PolicyConfig

# Time constant of the usual prompt/output mix (seconds): hours of traffic, so a burst of
# long prompts stands out against it.
MIX_TIME_CONSTANT_S = 3600.0


def draining(obs: Observation, *, config: PolicyConfig, previous_queue: float | None) -> bool:
    """A backlog is being served: the token rate counts queued work, not new demand.

    Under overload the served rate is capped and requests queue; when capacity arrives
    the queue drains and the served rate spikes far above demand (a simulated ServeGen
    surge: 1600 tok/s served with 1400 queued, then 3000 tok/s for a minute, then 2000).
    Learning that spike as a trend scaled to 12 replicas where 5 sufficed."""
    q = obs.queue_depth
    return (
        q is not None
        and previous_queue is not None
        and previous_queue > config.queue_depth_per_replica * max(obs.warmed_replicas, 1)
        and q < previous_queue
    )


def queue_grew(obs: Observation, *, config: PolicyConfig, previous_queue: float | None) -> bool:
    """The queue is over one request per warmed replica and grew since the last pass:
    the warmed pods serve less than arrives, each past its limit."""
    q = obs.queue_depth
    return (
        q is not None
        and previous_queue is not None
        and q > config.queue_depth_per_replica * max(obs.warmed_replicas, 1)
        and q > previous_queue
    )


def drained_recently(obs: Observation, *, config: PolicyConfig, drained: float | None) -> bool:
    """A backlog was seen draining within `backlog_memory_windows` rate windows: the
    served rate and the P99 of the window still count it, though the queue is empty now."""
    memory = config.rate_window_seconds * config.backlog_memory_windows
    return (
        memory > 0.0
        and drained is not None
        and obs.sample_time is not None
        and 0.0 <= obs.sample_time - drained < memory
    )


def work_rate(obs: Observation, *, config: PolicyConfig, model: PolicyModel) -> float:
    """Demand in output-token equivalents at the usual request mix.

    The configured capacity (tokens/s per replica) was measured on some mix of prompt and
    output lengths; a replica's time goes to prefill as well as decode. With k =
    `prompt_token_weight` (the cost of a prompt token in output tokens), the load is
    work = output + k x prompt tokens/s, and the capacity in work units is target x (1 +
    k x usual prompt/output ratio), the ratio learned as a slowly decayed average of what
    was served. Dividing keeps the familiar unit: at the usual mix this is the output
    token rate; when prompts grow (long-context bursts, a shift to prefill-heavy traffic)
    it rises although output tokens do not. Without a prompt rate: the output rate."""
    assert obs.token_rate is not None
    out = max(obs.token_rate, 0.0)
    prompt = obs.prompt_token_rate
    k = config.prompt_token_weight
    if prompt is None or not math.isfinite(prompt) or k <= 0.0 or model.mix_output <= 0.0:
        return out
    ratio = model.mix_prompt / model.mix_output
    return (out + k * max(prompt, 0.0)) / (1.0 + k * ratio)


def unserved_work(
    obs: Observation,
    *,
    config: PolicyConfig,
    model: PolicyModel,
    previous_queue: float | None,
    gap: float,
) -> float:
    """Work/s (output-token equivalents, as `work_rate`) arriving that the served rate does
    not show: a saturated pod serves at its limit while requests queue, so its token rate
    reads its capacity, not the demand. The queue's growth since the previous sample
    (`gap` seconds ago), while it is longer than `queue_depth_per_replica` per warmed
    replica, is requests arriving faster than they are served; converted with the mean
    work of a served request (work rate / request rate). 0 without a queue over the
    allowance, a previous queue or a request rate. On azure-code one pod prefilling 7,500
    prompt tokens/s (all it can) held 200-400 waiting requests while the policy sized
    the fleet for the 90 tok/s it served."""
    q, served = obs.queue_depth, obs.request_rate
    if q is None or served is None or previous_queue is None or gap <= 0.0:
        return 0.0
    if not (math.isfinite(q) and math.isfinite(served)) or served <= 0.0:
        return 0.0
    if q <= config.queue_depth_per_replica * max(obs.warmed_replicas, 1):
        return 0.0
    growth = max(q - previous_queue, 0.0) / gap
    return growth * work_rate(obs, config=config, model=model) / served


def learn_mix(obs: Observation, *, model: PolicyModel) -> PolicyModel:
    prompt = obs.prompt_token_rate
    assert obs.token_rate is not None and obs.sample_time is not None
    if prompt is None or not math.isfinite(prompt) or obs.token_rate <= 0.0:
        return model
    gap = 0.0 if model.sample_time is None else max(obs.sample_time - model.sample_time, 0.0)
    keep = math.exp(-gap / MIX_TIME_CONSTANT_S)
    return model._replace(
        mix_prompt=float(f"{keep * model.mix_prompt + max(prompt, 0.0):.6g}"),
        mix_output=float(f"{keep * model.mix_output + obs.token_rate:.6g}"),
    )


def pressure(obs: Observation, config: PolicyConfig) -> float | None:
    """The worst watched P99 as a share of its SLO (None: none measured)."""
    shares = [p99 / slo for _, p99, slo in latencies(obs, config)]
    return max(shares) if shares else None


def zero_demand(obs: Observation) -> bool:
    """Nothing served, nothing prefilled, nothing waiting over the whole rate window."""
    return (
        obs.token_rate is not None
        and obs.token_rate <= 0.0
        and (obs.prompt_token_rate is None or obs.prompt_token_rate <= 0.0)
        and (obs.queue_depth is None or obs.queue_depth <= 0.0)
    )


def secs(x: float) -> str:
    return f"{x:.2f}" if x >= 1.0 else f"{x:.3g}"


def latency_slo(obs: Observation, config: PolicyConfig) -> float:
    """The P99 target of the configured latency signal for this observation: with a
    per-1k-prompt-token allowance, the target of the mean request (prompt tokens/s over
    requests/s); without one, or without both rates, the fixed `latency_slo_seconds`."""
    base = config.latency_slo_seconds
    per_1k = config.ttft_slo_per_1k_prompt_seconds
    prompt, requests = obs.prompt_token_rate, obs.request_rate
    if per_1k <= 0.0 or prompt is None or requests is None:
        return base
    if not (math.isfinite(prompt) and math.isfinite(requests)) or requests <= 0.0:
        return base
    return base + per_1k * max(prompt, 0.0) / requests / 1000.0


TPOT_SIGNAL = "P99 TPOT"  # the name `latencies` gives the TPOT pair


def latencies(obs: Observation, config: PolicyConfig) -> list[tuple[str, float, float]]:
    """The watched (name, P99, SLO) pairs present in the observation."""
    out: list[tuple[str, float, float]] = []
    if obs.p99_seconds is not None and math.isfinite(obs.p99_seconds):
        out.append(("P99", obs.p99_seconds, latency_slo(obs, config)))
    tpot, slo = obs.p99_tpot_seconds, config.tpot_slo_seconds
    if tpot is not None and slo is not None and math.isfinite(tpot):
        out.append((TPOT_SIGNAL, tpot, slo))
    return out


def latency_margin_short(obs: Observation, config: PolicyConfig) -> str | None:
    """Why a scale-down would be unsafe now: a P99 already near its SLO (None: safe)."""
    for name, p99, slo in latencies(obs, config):
        if p99 > config.scale_down_latency_margin * slo:
            return (
                f"{name} {secs(p99)} s is above {config.scale_down_latency_margin:.0%} of its "
                f"{slo:g} s SLO"
            )
    return None
