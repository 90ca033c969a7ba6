"""The operator's periodic loops, started and stopped with kopf: the scaling pass
(`loops.scaling`) every `--autoscale-interval` and a full resync (`loops.reconcile`)
every `--resync-interval`."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import kopf

from modelscale.handlers import runtime
from modelscale.loops import breaker, reconcile, scaling

log = logging.getLogger(__name__)

LOOPS = "modelscale-loops"
# The circuit breaker looks more often than the scaler: a sick pod should leave traffic
# within seconds.
BREAKER_INTERVAL_SECONDS = 5.0


async def _every(
    interval: float, what: str, work: Callable[[], object], *, initial_delay: float = 0.0
) -> None:
    await asyncio.sleep(initial_delay)
    while True:
        started = time.monotonic()
        try:
            # The Kubernetes and Prometheus clients block: keep them off the event loop.
            await asyncio.to_thread(work)
        except Exception:
            log.exception("%s failed; next in %.0f s", what, interval)
        await asyncio.sleep(max(0.0, interval - (time.monotonic() - started)))


@kopf.on.startup()
async def autoscaler_start(memo: kopf.Memo, **_: Any) -> None:
    rt = runtime.of(memo)
    config = rt.config
    memo[LOOPS] = [
        asyncio.create_task(
            _every(
                config.autoscale_interval,
                "scaling pass",
                lambda: scaling.timed_pass(rt.api, config=config),
            ),
            name="modelscale-autoscaler",
        ),
        asyncio.create_task(
            # kopf's resume handlers reconcile everything at start; resync after that.
            _every(
                config.resync_interval,
                "resync",
                lambda: reconcile.resync_all(rt.api, config=config, now=time.time()),
                initial_delay=config.resync_interval,
            ),
            name="modelscale-resync",
        ),
        asyncio.create_task(
            _every(
                min(BREAKER_INTERVAL_SECONDS, config.autoscale_interval),
                "circuit breaker pass",
                lambda: breaker.run_pass(rt.api, config=config, now=time.time()),
            ),
            name="modelscale-breaker",
        ),
    ]


@kopf.on.cleanup()
async def autoscaler_stop(memo: kopf.Memo, **_: Any) -> None:
    for task in memo.get(LOOPS, []):
        task.cancel()
