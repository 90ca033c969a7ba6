"""What the loops read from the operator's watches instead of listing each pass: its
ModelDeployments, their pods (as `PodFacts`) and what their Deployments run.

The watches are kopf's own (`handlers.indexes` registers them as kopf indexes on the
streams kopf already keeps for its handlers: one watch per kind, resumed from its
resourceVersion, listed again on 410 Gone). Listing 3,000 pods each pass deserialised
12.6 MB and held the GIL for ~10 s; a snapshot of the cache costs milliseconds.

kopf updates its indexes on the event loop; the loops read them from worker threads.
Each read here copies one dict's keys or values in a single C-level call (atomic under
the GIL), and a key that vanished in between is skipped, so a reader never sees a
half-updated store. Until kopf has listed every watched kind once (`synced`), the caches
are incomplete: readers get None and list as before."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from modelscale.kube.apply import Running
from modelscale.podfacts import PodFacts

Key = tuple[str, str]  # (namespace, name) of a ModelDeployment
T = TypeVar("T")

Source = Mapping[Key, Iterable[T]]


def _snapshot(source: Source[T]) -> dict[Key, list[T]]:
    out: dict[Key, list[T]] = {}
    for key in list(source):
        store = source.get(key)
        if store is not None:
            values = list(store)
            if values:
                out[key] = values
    return out


@dataclasses.dataclass
class Cache:
    """Filled in by the kopf startup handler (`attach`) once kopf made its indexes."""

    synced: threading.Event = dataclasses.field(default_factory=threading.Event)
    _pods: Source[PodFacts] | None = None
    _modeldeployments: Source[dict[str, Any]] | None = None
    _running: Source[Running] | None = None

    def attach(
        self,
        *,
        pods: Source[PodFacts],
        modeldeployments: Source[dict[str, Any]],
        running: Source[Running],
    ) -> None:
        self._pods, self._modeldeployments, self._running = pods, modeldeployments, running

    def ready(self) -> bool:
        return self.synced.is_set() and self._pods is not None

    def pods(self) -> dict[Key, list[PodFacts]] | None:
        """Every watched ModelDeployment pod by ModelDeployment (None: not synced yet)."""
        if not self.ready() or self._pods is None:
            return None
        return _snapshot(self._pods)

    def pods_of(self, key: Key) -> list[PodFacts] | None:
        if not self.ready() or self._pods is None:
            return None
        return list(self._pods.get(key) or ())

    def modeldeployments(self) -> list[dict[str, Any]] | None:
        """Every watched ModelDeployment's body as last seen (None: not synced yet)."""
        if not self.ready() or self._modeldeployments is None:
            return None
        return [body for bodies in _snapshot(self._modeldeployments).values() for body in bodies]

    def modeldeployment(self, key: Key) -> dict[str, Any] | None:
        """One ModelDeployment's body as last seen; None when absent or not synced."""
        if not self.ready() or self._modeldeployments is None:
            return None
        bodies = list(self._modeldeployments.get(key) or ())
        return bodies[-1] if bodies else None

    def running(self) -> dict[Key, Running] | None:
        """What each ModelDeployment's Deployment runs (None: not synced yet)."""
        if not self.ready() or self._running is None:
            return None
        return {key: values[-1] for key, values in _snapshot(self._running).items()}

    def running_of(self, key: Key) -> Running | None:
        """What one ModelDeployment's Deployment runs as last seen; None when absent or
        not synced (then read it)."""
        if not self.ready() or self._running is None:
            return None
        values = list(self._running.get(key) or ())
        return values[-1] if values else None
