"""The liveness probe (`/healthz`, served by kopf): it fails when the scaling loop's last
completed pass is older than `telemetry.STALE_AFTER_INTERVALS` intervals, so the kubelet
restarts an operator whose loop hangs instead of leaving the cluster unscaled."""

from __future__ import annotations

import time
from typing import Any

import kopf

from modelscale import telemetry
from modelscale.handlers import runtime


# async: a sync probe runs in kopf's handler thread pool, and behind a thousand
# reconciles (1,000 new ModelDeployments) it timed out and the kubelet killed a busy but
# healthy operator. The check itself is a lock and a subtraction.
@kopf.on.probe(id="scaling_loop")
async def scaling_loop_alive(memo: kopf.Memo, **_: Any) -> str:
    interval = runtime.of(memo).config.autoscale_interval
    stuck = telemetry.SCALING_LOOP.stale(now=time.monotonic(), interval=interval)
    if stuck is not None:
        # Permanent: kopf would retry a temporary error inside the probe request.
        raise kopf.PermanentError(stuck)
    return "alive"
