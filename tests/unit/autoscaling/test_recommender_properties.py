"""The policy never raises on what the CRD accepts (issue 10, item 7).

Hypothesis draws scaling specs anywhere inside the CRD's bounds (the smallest positive
float, the largest int, tiny and huge targets) and runs the policy over a series of
observations as Prometheus could report them (missing, zero, huge, stale, out of order).
Every pass must give a replica count within the spec's bounds, a status the Kubernetes API
takes (finite numbers only) and a state that survives the round trip through status.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from modelscale.api import v1alpha1 as api
from modelscale.api.v1alpha1 import ModelDeployment, ModelDeploymentStatus, to_api
from modelscale.autoscaling import recommender
from modelscale.autoscaling.types import Observation, ScalingState
from modelscale.control import scaling

NOW = 1_800_000_000.0
TINY = 5e-324  # the smallest positive float: `gt=0` lets it through
HUGE = sys.float_info.max


def within(model: type[BaseModel], name: str) -> st.SearchStrategy[float]:
    """Floats the field accepts, read from its own bounds (so from the CRD's): the bounds
    themselves, the smallest float above an exclusive one, and anything in between."""
    lo, hi, open_lo = 0.0, HUGE, False
    for bound in model.model_fields[name].metadata:
        lo = float(getattr(bound, "ge", getattr(bound, "gt", lo)))
        open_lo = open_lo or hasattr(bound, "gt")
        hi = float(getattr(bound, "le", hi))
    lo = math.nextafter(lo, math.inf) if open_lo else lo
    edges = st.sampled_from([lo, math.nextafter(lo, math.inf), 1.0, hi][: 4 if hi >= 1 else 2])
    return st.one_of(edges, st.floats(min_value=lo, max_value=hi, allow_nan=False))


BIG_INT = st.one_of(st.integers(min_value=1, max_value=5), st.just(10000))


@st.composite
def specs(draw: st.DrawFn) -> dict[str, Any]:
    lo = draw(st.integers(min_value=1, max_value=10000))
    hi = draw(st.integers(min_value=lo, max_value=10000))
    behavior = draw(st.sampled_from(["Hold", "Floor"]))
    missing: dict[str, Any] = {
        "behavior": behavior,
        "staleAfterSeconds": draw(within(api.OnMissingMetrics, "stale_after_seconds")),
    }
    if behavior == "Floor":
        missing["floorReplicas"] = draw(st.one_of(st.integers(0, 20), st.just(10000)))
    return {
        "model": {"name": "m", "repository": "/models"},
        "minReplicas": lo,
        "maxReplicas": hi,
        "scaling": {
            "targets": {
                "tokensPerSecondPerReplica": draw(
                    within(api.Targets, "tokens_per_second_per_replica")
                ),
                "headroom": draw(within(api.Targets, "headroom")),
                "latencySLO": {"p99Seconds": draw(within(api.LatencySLO, "p99_seconds"))},
                **(
                    {
                        "timePerOutputTokenP99Seconds": draw(
                            within(api.Targets, "time_per_output_token_p99_seconds")
                        )
                    }
                    if draw(st.booleans())
                    else {}
                ),
            },
            "forecast": {
                "horizonSeconds": draw(within(api.Forecast, "horizon_seconds")),
                "lookbackSeconds": draw(within(api.Forecast, "lookback_seconds")),
                "seasonality": draw(st.sampled_from(["Auto", "None", "Daily"])),
            },
            "scaleUp": {
                "stabilizationWindowSeconds": draw(
                    within(api.ScaleUp, "stabilization_window_seconds")
                ),
                "maxStep": draw(BIG_INT),
            },
            "scaleDown": {
                "stabilizationWindowSeconds": draw(
                    within(api.ScaleDown, "stabilization_window_seconds")
                ),
                "maxStep": draw(BIG_INT),
            },
            "onMissingMetrics": missing,
        },
    }


# What the metrics layer hands the policy: missing, or finite and non-negative (it drops NaN
# and refuses negative and infinite rates, issue 10 item 2), huge included.
METRIC = st.one_of(
    st.none(),
    st.sampled_from([0.0, TINY, 1.0, 1e300, HUGE]),
    st.floats(min_value=0, max_value=1e6, allow_nan=False),
)


@st.composite
def observations(draw: st.DrawFn, *, max_replicas: int) -> list[Observation]:
    out, now = [], NOW
    for _ in range(draw(st.integers(min_value=1, max_value=12))):
        now += draw(st.sampled_from([0.0, TINY, 1.0, 15.0, 600.0]))
        current = draw(st.integers(min_value=0, max_value=min(max_replicas, 50)))
        out.append(
            Observation(
                now=now,
                token_rate=draw(METRIC),
                p99_seconds=draw(METRIC),
                queue_depth=draw(METRIC),
                sample_time=draw(st.sampled_from([None, now, now - 5.0, now - 1e6, now + 5.0])),
                warmed_replicas=draw(st.integers(min_value=0, max_value=current)),
                current_replicas=current,
                measured_horizon_seconds=draw(st.sampled_from([None, TINY, 1.0, 600.0, 7200.0])),
                p99_tpot_seconds=draw(METRIC),
                prompt_token_rate=draw(METRIC),
            )
        )
    return out


@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
@given(data=st.data(), spec=specs())
def test_the_policy_never_raises_on_a_spec_the_crd_accepts(
    data: st.DataObject, spec: dict[str, Any]
) -> None:
    try:
        md = ModelDeployment.model_validate({"metadata": {"name": "m"}, "spec": spec})
    except ValidationError:
        assume(False)  # outside the CRD: not this property's business
    config = scaling.policy_config(md.spec)
    state = ScalingState()
    for obs in data.draw(observations(max_replicas=md.spec.max_replicas)):
        rec, state = recommender.recommend(obs, config=config, state=state)
        assert 0 <= rec.replicas <= md.spec.max_replicas, rec
        # Below minReplicas only on the way up to it (maxStep limits each step).
        assert rec.replicas >= min(md.spec.min_replicas, obs.current_replicas), rec
        # What the scaling loop writes to status: finite numbers, JSON, a state it reads back.
        written = to_api(
            scaling.status(md, obs=obs, rec=rec, state=state, desired=rec.replicas, now=obs.now),
            patch=True,
        )
        json.dumps(written, allow_nan=False)
        md = md.model_copy(update={"status": ModelDeploymentStatus.model_validate(written)})
        state = scaling.previous_state(md)
