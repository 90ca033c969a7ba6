"""The operator's periodic loops, started and stopped with kopf: the scaling pass
(`loops.scaling`) every `--autoscale-interval` and a full resync (`loops.reconcile`)
every `--resync-interval`.

Every replica runs the loops; a pass does its work only on the leader (`modelscale.leader`),
so a follower's loop still completes (its liveness stays green) without writing. A replica
that becomes leader runs both at once instead of waiting out the interval: that is the
failover time to the next scaling pass."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import ctypes
import ctypes.util
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import kopf

from modelscale import telemetry
from modelscale.handlers import indexes, runtime
from modelscale.kube.lease import NotLeaderError
from modelscale.leader import Leadership
from modelscale.loops import breaker, reconcile, scaling

log = logging.getLogger(__name__)


def _malloc_trim() -> Callable[[], object]:
    """glibc's malloc_trim(0), or nothing elsewhere (musl, macOS)."""
    try:
        trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return lambda: None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return lambda: trim(0)


# After each pass: give the pages the pass freed back to the system. A pass decodes a
# burst of responses in its own thread, and glibc keeps what a thread freed in that
# thread's arena (RSS that only grows); no library offers this, hence ctypes.
release_memory = _malloc_trim()


def _then_trim(work: Callable[[], object]) -> None:
    try:
        work()
    finally:
        release_memory()  # in the loop's thread: the event loop is not held up


LOOPS = "modelscale-loops"
# One thread per periodic loop (scaling, resync, breaker).
LOOP_THREADS = concurrent.futures.ThreadPoolExecutor(
    max_workers=3, thread_name_prefix="modelscale-loop"
)
# The circuit breaker looks more often than the scaler: a sick pod should leave traffic
# within seconds.
BREAKER_INTERVAL_SECONDS = 5.0


async def _every(
    interval: float,
    what: str,
    work: Callable[[], object],
    *,
    leader: Leadership,
    wake: asyncio.Event,
    idle: Callable[[], object] = lambda: None,
    initial_delay: float = 0.0,
) -> None:
    """Run `work` every `interval` (at once when `wake` is set) while this replica leads;
    a follower's tick runs `idle` instead (a liveness heartbeat belongs there: a follower
    is healthy without doing passes)."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(wake.wait(), timeout=initial_delay)
    while True:
        wake.clear()
        started = time.monotonic()
        # Soak figures (bench/scale.py): what the process holds should not grow.
        telemetry.ASYNCIO_TASKS.set(len(asyncio.all_tasks()))
        telemetry.THREADS.set(threading.active_count())
        try:
            if leader.holds():
                # The Kubernetes and Prometheus clients block: keep them off the event loop,
                # in threads of their own: asyncio's default pool is where the create and
                # resume handlers reconcile, and behind a thousand of those the scaling
                # pass did not start for minutes (the liveness probe then failed).
                await asyncio.get_running_loop().run_in_executor(LOOP_THREADS, _then_trim, work)
            else:
                idle()
        except NotLeaderError as err:
            log.info("%s stopped: %s", what, err)
        except Exception:
            log.exception("%s failed; next in %.0f s", what, interval)
        remaining = max(0.0, interval - (time.monotonic() - started))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake.wait(), timeout=remaining)


@kopf.on.startup()
async def autoscaler_start(memo: kopf.Memo, **kwargs: Any) -> None:
    rt = runtime.of(memo)
    indexes.attach(rt, kwargs)
    config = rt.config
    wake_scaling, wake_resync = asyncio.Event(), asyncio.Event()
    # The first resync after taking the lease lists the ModelDeployments instead of reading
    # the watch cache: a follower's kopf worker for a ModelDeployment waits in its handler
    # until this replica leads, so the cached copy stops at the last event before that
    # wait (a takeover resync applied a stale spec.replicas and deleted a pod the new
    # leader was warming).
    list_next = threading.Event()  # set in the event loop, read in the resync thread

    async def leading() -> None:
        list_next.set()
        wake_scaling.set()
        wake_resync.set()

    def resync() -> None:
        listed = list_next.is_set()
        list_next.clear()
        reconcile.resync_all(
            rt.resync_api or rt.api,
            config=config,
            now=time.time(),
            cache=None if listed else rt.cache,
        )

    async def stopped() -> None:
        return None

    rt.leader.subscribe(started=leading, stopped=stopped)
    memo[LOOPS] = [
        asyncio.create_task(
            _every(
                config.autoscale_interval,
                "scaling pass",
                lambda: scaling.timed_pass(rt.loops_api or rt.api, config=config, cache=rt.cache),
                leader=rt.leader,
                wake=wake_scaling,
                # A follower is alive without passes: its tick is the liveness heartbeat.
                idle=lambda: telemetry.SCALING_LOOP.beat(now=time.monotonic()),
            ),
            name="modelscale-autoscaler",
        ),
        asyncio.create_task(
            # kopf's resume handlers reconcile everything at start; resync after that (and
            # at once when this replica takes the lease over).
            _every(
                config.resync_interval,
                "resync",
                resync,
                leader=rt.leader,
                wake=wake_resync,
                initial_delay=config.resync_interval,
            ),
            name="modelscale-resync",
        ),
        asyncio.create_task(
            _every(
                min(BREAKER_INTERVAL_SECONDS, config.autoscale_interval),
                "circuit breaker pass",
                lambda: breaker.run_pass(
                    rt.loops_api or rt.api, config=config, now=time.time(), cache=rt.cache
                ),
                leader=rt.leader,
                wake=asyncio.Event(),
            ),
            name="modelscale-breaker",
        ),
    ]


@kopf.on.cleanup()
async def autoscaler_stop(memo: kopf.Memo, **_: Any) -> None:
    for task in memo.get(LOOPS, []):
        task.cancel()
