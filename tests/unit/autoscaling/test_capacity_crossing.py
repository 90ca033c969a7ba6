"""Where the latency curve crosses the knee (CapacityModel.hyperbolic_crossing): 1 / P99
linear between a bin within the knee and a slower one, as queueing and a filling batch
make it, instead of P99 linear."""

from __future__ import annotations

from dataclasses import replace

from modelscale.autoscaling import state
from modelscale.autoscaling.capacity import CapacityModel


def test_the_hyperbolic_crossing_puts_the_knee_near_the_saturated_bin_not_the_calm_one() -> None:
    """`hyperbolic_crossing` (docs/policy.md, "Twentieth split"; the policy's default since
    the twenty-first round): a 1,000 tok/s prior
    (bins 200 wide) on pods that saturate near 340 tok/s. The fleet served 185 tok/s each
    calm (TTFT 0.13 s) and then 330 with one replica saturated (TTFT 12.6 s against a 2 s
    SLO). P99 linear between the two bins puts the crossing at 127 tok/s, a third of what
    the replica was serving; 1 / P99 linear puts it at 287, under the 330 served."""
    prior, slo = 1000.0, 2.0

    def capacity(model: CapacityModel) -> float:
        s = model.initial(target=prior)
        for _ in range(12):
            s = model.observe(s, load=185.0, p99=0.13, target=prior, slo=slo)
        for _ in range(12):
            s = model.observe(s, load=330.0, p99=12.6, target=prior, slo=slo)
        return model.capacity(s, target=prior)

    linear = capacity(replace(state.CAPACITY, hyperbolic_crossing=False))
    hyperbolic = capacity(state.CAPACITY)
    assert state.CAPACITY.hyperbolic_crossing is True  # frozen by the twenty-first round
    assert linear < 150.0, linear
    assert 250.0 < hyperbolic < 330.0, hyperbolic
