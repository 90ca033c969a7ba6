"""How the scaling loop batches its Prometheus queries, decided without I/O.

ModelDeployments are grouped by (Prometheus URL, backend preset, latency signal); each
group costs one query per signal, so a pass over 200 ModelDeployments of one kind issues
as many queries as a pass over one. Spec overrides cost one query each. Members that set
a different `prometheus.timeoutSeconds` get a group of their own, so one ModelDeployment's
long timeout never makes the others wait for a slow Prometheus."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from modelscale.api.v1alpha1 import ModelDeployment
from modelscale.metrics import promql
from modelscale.podfacts import PodFacts

Key = promql.Key  # (namespace, name) of a ModelDeployment


class GroupKey(NamedTuple):
    url: str
    backend: str
    latency_signal: str


@dataclass(frozen=True)
class Group:
    """ModelDeployments that one batch of queries serves."""

    key: GroupKey
    members: tuple[ModelDeployment, ...]
    owners: Mapping[tuple[str, str], Key]
    """(namespace, pod) -> ModelDeployment, for the pods whose metrics count."""
    overrides: Mapping[Key, Mapping[str, str]]
    """Per ModelDeployment: signal -> the spec's own PromQL."""
    timeout_seconds: float
    watch_tpot: bool
    """Some member sets a time-per-output-token SLO (a second latency objective)."""


def group_key(md: ModelDeployment, *, default_url: str) -> GroupKey:
    scaling = md.spec.scaling
    return GroupKey(
        url=scaling.prometheus.url or default_url,
        backend=md.spec.model.backend,
        latency_signal=scaling.targets.latency_slo.signal,
    )


def overrides(md: ModelDeployment) -> dict[str, str]:
    q = md.spec.scaling.prometheus.queries
    given = {
        promql.TOKEN_RATE: q.token_rate,
        promql.PROMPT_TOKEN_RATE: q.prompt_token_rate,
        promql.REQUEST_RATE: q.request_rate,
        promql.LATENCY_P99: q.latency_p99,
        promql.QUEUE_DEPTH: q.queue_depth,
    }
    return {signal: expr for signal, expr in given.items() if expr}


def by_key(
    mds: Sequence[ModelDeployment], *, default_url: str
) -> dict[GroupKey, list[ModelDeployment]]:
    out: dict[GroupKey, list[ModelDeployment]] = defaultdict(list)
    for md in mds:
        out[group_key(md, default_url=default_url)].append(md)
    return dict(out)


def serving(pod: PodFacts) -> bool:
    """Warm-up requests are cold by design: their latency is not the SLO's and their
    tokens are not demand. Only warmed, Ready pods on Ready nodes are measured."""
    return pod.ready and pod.warmed and not pod.deleting and pod.node_ready


def plan(
    mds: Sequence[ModelDeployment],
    *,
    pods_by_md: Mapping[Key, Sequence[PodFacts]],
    default_url: str,
) -> list[Group]:
    """The query groups of one pass."""
    out: list[Group] = []
    for key, same_key in by_key(mds, default_url=default_url).items():
        by_timeout: dict[float, list[ModelDeployment]] = defaultdict(list)
        for md in same_key:
            by_timeout[md.spec.scaling.prometheus.timeout_seconds].append(md)
        out.extend(
            _group(key, members, timeout=timeout, pods_by_md=pods_by_md)
            for timeout, members in sorted(by_timeout.items())
        )
    return out


def _group(
    key: GroupKey,
    members: Sequence[ModelDeployment],
    *,
    timeout: float,
    pods_by_md: Mapping[Key, Sequence[PodFacts]],
) -> Group:
    owners = {
        (md.namespace, pod.name): (md.namespace, md.name)
        for md in members
        for pod in pods_by_md.get((md.namespace, md.name), ())
        if serving(pod)
    }
    return Group(
        key=key,
        members=tuple(members),
        owners=owners,
        overrides={(md.namespace, md.name): o for md in members if (o := overrides(md))},
        timeout_seconds=timeout,
        watch_tpot=any(md.spec.scaling.targets.time_per_output_token_p99_seconds for md in members),
    )
