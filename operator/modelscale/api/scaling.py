"""The scaling part of the ModelDeployment spec (`spec.scaling`): mode, targets, forecast,
scale-up/-down limits, Prometheus and what to do without metrics. Re-exported by `v1alpha1`."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from modelscale.api.base import _Model, _sub

ScalingMode = Literal["Predictive", "RecommendOnly", "External"]
LatencySignal = Literal["TimeToFirstToken", "TimePerOutputToken", "EndToEnd"]
Seasonality = Literal["Auto", "None", "Daily"]
MissingMetricsBehavior = Literal["Hold", "Floor"]

MSG_FLOOR = "scaling.onMissingMetrics.floorReplicas is required when behavior is Floor"


class LatencySLO(_Model):
    """The latency objective the autoscaler keeps."""

    signal: LatencySignal = "TimeToFirstToken"
    """Which latency: time to first token, time per output token, or end-to-end request."""
    p99_seconds: float = Field(default=2.0, ge=0.001, le=3600)
    """P99 of `signal` must stay at or below this many seconds (1 ms .. 1 h)."""
    per_thousand_prompt_tokens_seconds: float = Field(default=0.0, ge=0.0, le=3600)
    """TimeToFirstToken only: a target that grows with the prompt, `p99Seconds` plus this
    many seconds per 1,000 prompt tokens (e.g. 0.5: 2 s for a chat turn, 7 s for a
    10k-token document). The autoscaler compares the P99 with the target of the mean
    request (prompt tokens/s over requests/s). 0: a fixed target."""

    @model_validator(mode="after")
    def _allowance_needs_ttft(self) -> LatencySLO:
        if self.per_thousand_prompt_tokens_seconds > 0 and self.signal != "TimeToFirstToken":
            raise ValueError(
                "scaling.targets.latencySLO.perThousandPromptTokensSeconds applies to "
                f"signal TimeToFirstToken only, not {self.signal}: set it to 0 or change signal"
            )
        return self


class Targets(_Model):
    """What one replica can do while meeting the SLO."""

    tokens_per_second_per_replica: float = Field(default=500.0, ge=0.001, le=1e9)
    """Output tokens/s one warmed replica sustains at the SLO. Default: Llama-3.1-8B with
    vLLM on one A100 with 8 concurrent streams (about 75 tokens/s x 6.6)."""
    latency_slo: LatencySLO = Field(
        default_factory=LatencySLO,
        alias="latencySLO",
        json_schema_extra={"default": {}},
    )
    headroom: float = Field(default=0.8, ge=0.01, le=1)
    """Plan for at most this share of the capacity (0.01 <= headroom <= 1)."""
    time_per_output_token_p99_seconds: float | None = Field(default=None, ge=0.0001, le=60)
    """Optional second SLO: P99 time per output token (vLLM backend). A long-prompt burst can
    break it while time to first token still looks fine; when set, the autoscaler also
    scales up on it and does not scale down while it is near the limit."""


class Forecast(_Model):
    """How far ahead and from what history the autoscaler forecasts."""

    horizon_seconds: float = Field(default=120.0, ge=1, le=3600)
    """Forecast horizon used until the operator has measured how long its new pods take to
    serve (creation to warmed); then the measurement is used."""
    use_measured_horizon: bool = True
    """Replace `horizonSeconds` by the measured pod start-up time once known."""
    lookback_seconds: float = Field(default=3600.0, ge=60, le=30 * 86400)
    """History the forecaster fits on."""
    seasonality: Seasonality = "Auto"
    """Daily seasonality: detect it (`Auto`), assume it (`Daily`) or ignore it (`None`)."""


class ScaleUp(_Model):
    """Limits on scaling up."""

    stabilization_window_seconds: float = Field(default=0.0, ge=0, le=3600)
    """Scale up to the lowest recommendation of this window (0: act at once)."""
    max_step: int = Field(default=100, ge=1, le=10000)
    """At most this many replicas added per decision."""


class ScaleDown(_Model):
    """Limits on scaling down."""

    stabilization_window_seconds: float = Field(default=180.0, ge=0, le=86400)
    """Scale down only to the highest recommendation of this window. Default 180 s, two
    minutes under the HPA's 300 s: a replica kept for nothing costs as much as one
    missing. On the benchmark's 33 tuning cases, with the policy's scale-down hysteresis
    at 0.15, 180 s missed 146 of about 8,770 1-minute windows at 1.236x the oracle where 240 s
    with hysteresis 0.1 missed 147 at 1.243x (docs/policy.md, "Tenth split")."""
    max_step: int = Field(default=1, ge=1, le=10000)
    """At most this many replicas removed per decision."""


class PromQueries(_Model):
    """PromQL overrides, one per signal. Each query must return one series per
    ModelDeployment labelled `modeldeployment` and `namespace`; unset signals use the
    preset of `model.backend`."""

    token_rate: str | None = None
    """Output tokens/s."""
    prompt_token_rate: str | None = None
    """Prompt (input) tokens/s."""
    request_rate: str | None = None
    """Requests/s."""
    latency_p99: str | None = None
    """P99 of the SLO's latency signal, in seconds."""
    queue_depth: str | None = None
    """Requests waiting."""


class Prometheus(_Model):
    """Where metrics come from."""

    url: str | None = None
    """Prometheus base URL; overrides the operator's `--prometheus-url`. Must start with one
    of the prefixes the cluster admin allows (chart value `prometheus.allowedUrls`; default:
    the operator's own URL only); the operator's Prometheus credentials are never sent to
    it."""
    timeout_seconds: float = Field(default=5.0, gt=0, le=300)
    """Timeout of each Prometheus query; a query that times out counts as missing metrics."""
    queries: PromQueries = _sub(PromQueries)


class OnMissingMetrics(_Model):
    """What the autoscaler does when metrics are missing or stale. It never scales down
    because of missing metrics."""

    behavior: MissingMetricsBehavior = "Hold"
    """`Hold` keeps the current replicas; `Floor` scales to at least `floorReplicas`."""
    floor_replicas: int | None = Field(default=None, ge=0, le=10000)
    """With `behavior: Floor`: scale up to at least this many replicas while metrics are
    missing (required then)."""
    stale_after_seconds: float = Field(default=60.0, ge=1, le=3600)
    """A newest sample older than this counts as missing."""

    @model_validator(mode="after")
    def _check(self) -> OnMissingMetrics:
        if self.behavior == "Floor" and self.floor_replicas is None:
            raise ValueError(MSG_FLOOR)
        return self


class Scaling(_Model):
    """How the number of replicas is decided."""

    mode: ScalingMode = "Predictive"
    """`Predictive`: the operator scales ahead of demand. `RecommendOnly`: it computes and
    reports a recommendation in status but does not act. `External`: `spec.replicas` (the
    `/scale` subresource: kubectl scale, HPA, KEDA) decides."""
    targets: Targets = _sub(Targets)
    forecast: Forecast = _sub(Forecast)
    scale_up: ScaleUp = _sub(ScaleUp)
    scale_down: ScaleDown = _sub(ScaleDown)
    prometheus: Prometheus = _sub(Prometheus)
    on_missing_metrics: OnMissingMetrics = _sub(OnMissingMetrics)
