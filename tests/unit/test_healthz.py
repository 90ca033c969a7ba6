"""`/healthz` fails once the scaling loop's last completed pass is older than three
intervals, so the kubelet restarts a hung operator. Served by kopf's own health reporter,
as `modelscale run` serves it."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import aiohttp
import kopf
import pytest
from kopf._core.engines import probing

from modelscale import telemetry
from modelscale.config import OperatorConfig
from modelscale.handlers import health, runtime

INTERVAL = 15.0


@pytest.mark.parametrize(
    ("age", "stuck"),
    [
        pytest.param(0.0, False, id="just-completed"),
        pytest.param(44.0, False, id="under-three-intervals"),
        pytest.param(46.0, True, id="over-three-intervals"),
    ],
)
def test_the_loop_is_stuck_after_three_intervals(age: float, stuck: bool) -> None:
    beat = telemetry.Heartbeat(started=1000.0)
    why = beat.stale(now=1000.0 + age, interval=INTERVAL)
    assert (why is not None) is stuck
    if stuck:
        assert why == "the last scaling pass completed 46 s ago (more than 3 intervals of 15 s)"


def test_a_completed_pass_resets_the_clock() -> None:
    beat = telemetry.Heartbeat(started=0.0)
    beat.beat(now=100.0)
    assert beat.stale(now=140.0, interval=INTERVAL) is None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _healthz(memo: kopf.Memo) -> int:
    port = _free_port()
    ready = asyncio.Event()
    server = asyncio.create_task(
        probing.health_reporter(
            f"http://127.0.0.1:{port}/healthz",
            memo=memo,
            indices={},  # type: ignore[arg-type]
            registry=kopf.get_default_registry(),
            settings=kopf.OperatorSettings(),
            ready_flag=ready,
        )
    )
    try:
        await asyncio.wait_for(ready.wait(), 10)
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{port}/healthz") as resp,
        ):
            return resp.status
    finally:
        server.cancel()
        await asyncio.gather(server, return_exceptions=True)


@pytest.mark.parametrize(("age", "status"), [(1.0, 200), (3 * INTERVAL + 5, 500)])
def test_healthz_answers_from_the_scaling_loops_heartbeat(age: float, status: int) -> None:
    assert health.scaling_loop_alive is not None  # registered with kopf on import
    rt: Any = runtime.Runtime(
        config=OperatorConfig(autoscale_interval=INTERVAL),
        api=None,  # type: ignore[arg-type]
        warmup=None,  # type: ignore[arg-type]
    )
    telemetry.SCALING_LOOP.beat(now=time.monotonic() - age)
    try:
        got = asyncio.run(_healthz(kopf.Memo({runtime.MEMO_KEY: rt})))
    finally:
        telemetry.SCALING_LOOP.beat(now=time.monotonic())
    assert got == status
