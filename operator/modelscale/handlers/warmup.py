"""kopf handlers of the warm-up: every pod event of a ModelDeployment's pods goes to the
`WarmupRunner` (`loops.warmup`), which warms new pods up and opens their gate."""

from __future__ import annotations

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
    runtime.of(memo).warmup.start()


@kopf.on.cleanup()
async def warmup_cleanup(memo: kopf.Memo, **_: Any) -> None:
    runtime.of(memo).warmup.stop()
