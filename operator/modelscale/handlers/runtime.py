"""What the handlers share, built once by `modelscale run` and handed in through kopf's
`memo` (kopf gives every handler the operator's memo or a shallow copy of it)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from kubernetes import client

from modelscale.config import OperatorConfig
from modelscale.kube.cache import Cache
from modelscale.leader import Leadership
from modelscale.loops.warmup import WarmupRunner

MEMO_KEY = "modelscale"


@dataclasses.dataclass(frozen=True)
class Runtime:
    config: OperatorConfig
    api: client.ApiClient
    warmup: WarmupRunner
    leader: Leadership = dataclasses.field(default_factory=Leadership.standalone)
    """Who acts: only the replica holding the lease writes (`modelscale.leader`)."""
    loops_api: client.ApiClient | None = None
    """The scaling and breaker passes' client (their own rate limit); None: `api`."""
    resync_api: client.ApiClient | None = None
    """The periodic resync's client (its own rate limit); None: `api`."""
    cache: Cache = dataclasses.field(default_factory=Cache)
    """kopf's watches of ModelDeployments, their pods and Deployments (`handlers.indexes`)."""


def of(memo: Mapping[Any, Any]) -> Runtime:
    found = memo.get(MEMO_KEY)
    if not isinstance(found, Runtime):
        raise RuntimeError(
            "the modelscale handlers need the runtime in kopf's memo: start them with "
            "`modelscale run`"
        )
    return found
