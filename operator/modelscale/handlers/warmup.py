"""kopf handlers of the warm-up: every pod event of a ModelDeployment's pods goes to the
`WarmupRunner` (`loops.warmup`), which warms new pods up and opens their gate (on the
leader only; this module also starts the campaign for the lease)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import kopf

from modelscale.handlers import runtime
from modelscale.podfacts import MD_LABEL


@kopf.on.event("", "v1", "pods", labels={MD_LABEL: kopf.PRESENT})
async def pod_event(event: Mapping[str, Any], body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    runtime.of(memo).warmup.on_pod_event(event_type=event.get("type"), body=body)


@kopf.on.startup()
async def warmup_startup(memo: kopf.Memo, **_: Any) -> None:
    rt = runtime.of(memo)

    async def leading() -> None:
        await rt.warmup.resume(namespaces=rt.config.namespaces)

    async def stopped() -> None:
        rt.warmup.on_lost()

    rt.leader.subscribe(started=leading, stopped=stopped)
    rt.warmup.start()
    # Campaign only once every loop listens for the outcome.
    rt.leader.start()


@kopf.on.cleanup()
async def warmup_cleanup(memo: kopf.Memo, **_: Any) -> None:
    rt = runtime.of(memo)
    # A stopping replica neither renews nor writes any more, and hands the lease over.
    await asyncio.to_thread(rt.leader.stop)
    rt.warmup.stop()
