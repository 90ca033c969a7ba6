"""The serving-policy part of the ModelDeployment spec (`spec.serving`): how Triton batches,
prioritises and sheds requests inside each pod. Re-exported by `v1alpha1`.

The operator delivers it at model load (Triton's model load API with a configuration
override, before the warm-up), never by editing the user's model repository; see
docs/serving.md. Left out, nothing changes: the model runs with its repository config.

Field names follow Triton's model configuration (`dynamic_batching`, `ModelQueuePolicy`,
`instance_group`), in camelCase, and keep Triton's units (microseconds), so a user can map
each field to Triton's documentation one to one.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from modelscale.api.base import _Model

TimeoutAction = Literal["REJECT", "DELAY"]

# Backends whose models batch continuously inside their own engine and are decoupled
# (streaming): Triton's dynamic batcher, its priorities and queue policies do not apply.
CONTINUOUS_BATCHING_BACKENDS = ("vllm", "tensorrtllm")

MSG_DEFAULT_LEVEL = (
    "serving.priorities.defaultLevel must be between 1 and serving.priorities.levels"
)
MSG_QUEUE_LEVEL = (
    "serving.priorities.queues[].level must be between 1 and serving.priorities.levels"
)
MSG_CONTINUOUS_BATCHING = (
    "serving.dynamicBatching, serving.queue and serving.priorities need Triton's dynamic "
    "batcher, which the vllm and tensorrtllm backends do not use (they batch inside their "
    "engine): remove them, or set model.backend to the backend the model really uses"
)


class QueuePolicy(_Model):
    """How long requests may wait in Triton's queue and how many may wait (Triton's
    `ModelQueuePolicy`)."""

    max_queue_size: int = Field(default=0, ge=0, le=1_000_000)
    """Requests that may wait at once; a request beyond it is rejected at once with Triton's
    error ("Exceeds maximum queue size"). 0: unbounded."""
    default_timeout_microseconds: int = Field(default=0, ge=0, le=3_600_000_000)
    """How long a request may wait in the queue before `timeoutAction` applies. 0: no
    timeout."""
    timeout_action: TimeoutAction = "REJECT"
    """`REJECT`: a request whose timeout passed is refused with Triton's error ("Request
    timeout expired"). `DELAY`: it stays queued behind every request of its level that has
    not timed out."""
    allow_timeout_override: bool = False
    """Whether a request's own timeout (its `timeout` parameter) may replace
    `defaultTimeoutMicroseconds`."""


class LevelQueuePolicy(QueuePolicy):
    """The queue policy of one priority level."""

    level: int = Field(ge=1, le=255)
    """Priority level (1 is the most urgent)."""


class DynamicBatching(_Model):
    """Triton's dynamic batcher: requests that arrive close together are run as one batch."""

    preferred_batch_sizes: list[Annotated[int, Field(ge=1, le=1_000_000)]] = Field(
        default_factory=list, max_length=32
    )
    """Batch sizes the batcher aims for (each at most the model's `max_batch_size`). Empty:
    the largest batch it can form."""
    max_queue_delay_microseconds: int = Field(default=0, ge=0, le=60_000_000)
    """How long a request may wait for others to join its batch."""


class Priorities(_Model):
    """Priority levels (QoS tiers): Triton serves the queue of level 1 first, then 2, ..."""

    levels: int = Field(ge=1, le=255)
    """Number of levels; a request picks one with its `priority` parameter."""
    default_level: int = Field(ge=1, le=255)
    """Level of a request that names none (or names 0)."""
    queues: list[LevelQueuePolicy] = Field(
        default_factory=list,
        max_length=255,
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["level"],
        },
    )
    """Queue policy per level, by level; a level left out gets `serving.queue`."""

    @model_validator(mode="after")
    def _check(self) -> Priorities:
        if not 1 <= self.default_level <= self.levels:
            raise ValueError(MSG_DEFAULT_LEVEL)
        if any(not 1 <= queue.level <= self.levels for queue in self.queues):
            raise ValueError(MSG_QUEUE_LEVEL)
        return self


class CircuitBreaker(_Model):
    """Take a sick pod out of traffic: a warmed pod whose requests fail, or whose latency is
    an outlier against its siblings', gets its `modelscale.dev/warmed-up` gate closed
    (reason `CircuitOpen`), is warmed up again after `probeAfterSeconds` (half-open: the
    gate reopens only if that warm-up passes) and is replaced after `maxEjections`."""

    failure_ratio: float = Field(default=0.5, gt=0, le=1)
    """Eject a pod when its failed requests are at least this share of all its requests
    (failed / (failed + `nv_inference_request_success`)) over the last `windowSeconds`."""
    failure_counter: str = Field(
        default='nv_inference_request_failure{reason!="REJECTED"}',
        min_length=1,
        max_length=512,
        pattern=r"^[a-zA-Z_:][a-zA-Z0-9_:]*(\{.*\})?$",
    )
    """Counter of failed requests per pod, as a PromQL series selector (its per-pod rate is
    taken). The default is Triton's own, without requests a queue policy refused. Triton
    2.51 counts an error *response* of the Python backend as a success, so a Python model
    that fails by answering with an error needs a counter of its own here."""
    latency_factor: float = Field(default=3.0, gt=1, le=100)
    """Eject a pod whose mean latency exceeds this many times the median of its healthy
    siblings' (needs at least two siblings with traffic)."""
    min_request_rate: float = Field(default=0.2, ge=0, le=1_000_000)
    """Requests per second a pod must have had before it is judged at all."""
    window_seconds: int = Field(default=30, ge=5, le=3600)
    """Rate window of the per-pod signals."""
    max_ejected_percent: int = Field(default=34, ge=1, le=100)
    """Never more than this share of the pods ejected at once (and never the last healthy
    pod)."""
    probe_after_seconds: int = Field(default=30, ge=0, le=86400)
    """How long an ejected pod stays out before it is warmed up again (half-open). Keep it
    at least `windowSeconds`: a pod back sooner is judged on failures from before its
    ejection and ejected again."""
    max_ejections: int = Field(default=3, ge=1, le=100)
    """Ejections of one pod after which it is deleted and replaced instead."""


class Serving(_Model):
    """The serving policy Triton applies inside each pod. The operator loads the model with
    it before the pod is warmed up, and a change rolls the pods."""

    instance_count: int | None = Field(default=None, ge=1, le=64)
    """Model instances per pod (Triton's `instance_group[].count`; the kind stays the
    repository's). Unset: the repository's."""
    dynamic_batching: DynamicBatching | None = None
    """Batch requests that arrive close together (Triton's dynamic batcher)."""
    queue: QueuePolicy | None = None
    """Queue policy of every request (of every priority level without its own policy)."""
    priorities: Priorities | None = None
    """Priority levels and their queue policies."""
    circuit_breaker: CircuitBreaker | None = None
    """Take sick pods out of traffic (failing requests, latency outliers); unset: off.
    `{}` turns it on with the defaults."""

    @property
    def triton_config(self) -> dict[str, object]:
        """The fields delivered to Triton (a change of these, and only these, rolls pods)."""
        return self.model_dump(by_alias=True, mode="json", exclude={"circuit_breaker"})

    @property
    def uses_dynamic_batcher(self) -> bool:
        return (
            self.dynamic_batching is not None
            or self.queue is not None
            or self.priorities is not None
        )


def check_backend(serving: Serving | None, *, backend: str) -> None:
    """Refuse what a continuous-batching backend would silently ignore."""
    uses_batcher = serving is not None and serving.uses_dynamic_batcher
    if uses_batcher and backend in CONTINUOUS_BATCHING_BACKENDS:
        raise ValueError(MSG_CONTINUOUS_BATCHING)


# (path below spec, CEL rule, message), added to `v1alpha1.SPEC_RULES`.
SERVING_RULES: tuple[tuple[str, str, str], ...] = (
    (
        "serving.priorities",
        "self.defaultLevel >= 1 && self.defaultLevel <= self.levels",
        MSG_DEFAULT_LEVEL,
    ),
    (
        "serving.priorities",
        "!has(self.queues) || self.queues.all(q, q.level <= self.levels)",
        MSG_QUEUE_LEVEL,
    ),
    (
        "",
        "!has(self.serving) || !(self.model.backend in ['vllm', 'tensorrtllm'])"
        " || (!has(self.serving.dynamicBatching) && !has(self.serving.queue)"
        " && !has(self.serving.priorities))",
        MSG_CONTINUOUS_BATCHING,
    ),
)
