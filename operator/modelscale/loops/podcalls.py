"""The warm-up's calls to Kubernetes, off the event loop: reading the pod and its
ModelDeployment, writing the gate condition, annotations and events, deleting the pod.
Every pod write carries the pod's uid (a new pod that took the name is never touched)."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError

from modelscale import podfacts
from modelscale.api.v1alpha1 import API_VERSION, KIND, ModelDeployment
from modelscale.control import validation
from modelscale.kube import events, reads
from modelscale.kube import pods as kube_pods
from modelscale.podfacts import PodFacts
from modelscale.warmup import gate

T = TypeVar("T")


def pod_ref(facts: PodFacts) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": facts.name, "namespace": facts.namespace, "uid": facts.uid},
    }


def md_ref(body: Mapping[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": KIND, **body}


@dataclasses.dataclass(frozen=True)
class Spec:
    """A ModelDeployment as the warm-up read it: the body (for events) and the parsed
    object, or what is wrong with it."""

    body: dict[str, Any]
    md: ModelDeployment | None
    problem: str = ""


class PodCalls:
    """Short Kubernetes API calls of the warm-up, in their own small thread pool so that a
    queue of warm-ups never delays a status write."""

    def __init__(self, api: client.ApiClient) -> None:
        self._api = api
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="warmup-api")

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    def _read(self, facts: PodFacts) -> PodFacts:
        """Fresh facts; raises ApiException 404 if gone, 409 if replaced."""
        fresh = podfacts.read(reads.read_pod(self._api, namespace=facts.namespace, name=facts.name))
        if fresh.uid != facts.uid:
            raise ApiException(status=409, reason=f"pod {facts.name} was replaced")
        return fresh

    async def fresh(self, facts: PodFacts) -> PodFacts:
        """The pod read again; ApiException 404 if it is gone, 409 if it was replaced."""
        return await self.call(self._read, facts)

    async def _on_pod(self, fn: Callable[..., None], facts: PodFacts, **kwargs: Any) -> None:
        """`fn(api, namespace=, name=, uid=, **kwargs)`: a write to this very pod."""
        ref = {"namespace": facts.namespace, "name": facts.name, "uid": facts.uid}
        await self.call(fn, self._api, **ref, **kwargs)

    async def annotate(self, facts: PodFacts, updates: Mapping[str, str | None]) -> None:
        await self._on_pod(kube_pods.patch_annotations, facts, annotations=updates)

    async def event(
        self, involved: dict[str, Any], *, warning: bool, reason: str, message: str, now: float
    ) -> None:
        await self.call(
            events.post,
            self._api,
            involved=involved,
            type_="Warning" if warning else "Normal",
            reason=reason,
            message=message,
            now=now,
        )

    async def write_condition(
        self,
        facts: PodFacts,
        *,
        ok: bool,
        reason: str,
        message: str,
        now: float,
        annotations: Mapping[str, str | None] | None = None,
        retry_for: float = 0.0,
    ) -> PodFacts:
        """Write the gate condition, with `annotations` in the same patch; returns the
        facts with it, so that the next write keeps lastTransitionTime while the status
        stays the same."""
        condition = gate.warmed_condition(
            status=ok, reason=reason, message=message, now=now, previous=facts.warmed_condition
        )
        change = gate.GateChange(condition=condition, annotations=dict(annotations or {}))
        await self._on_pod(kube_pods.patch_condition, facts, change=change, retry_for=retry_for)
        return dataclasses.replace(facts, warmed_condition=condition)

    async def spec(self, facts: PodFacts) -> Spec | None:
        """The pod's ModelDeployment, parsed; None when it is gone."""
        body = await self.call(
            reads.fetch_modeldeployment,
            self._api,
            namespace=facts.namespace,
            name=facts.modeldeployment or "",
        )
        if body is None:
            return None
        try:
            return Spec(body=body, md=ModelDeployment.model_validate(body))
        except ValidationError as err:
            return Spec(
                body=body, md=None, problem=f"invalid ModelDeployment: {validation.short(err)}"
            )

    async def delete(self, facts: PodFacts) -> None:
        await self._on_pod(kube_pods.delete, facts)
