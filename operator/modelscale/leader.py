"""Which replica acts: leader election on a Lease, and the fence every write checks.

Several operator replicas run at once (the chart's default is two); all of them watch,
only the leader writes: it scales, reconciles and warms pods up. The election is the
kubernetes client's own (`kubernetes.leaderelection`, client-go's algorithm) and not
kopf's peering: peering only pauses kopf's own handlers, not our loops and thread pools,
and it has no deadline after which a replica that lost contact stops acting. Here:

- the leader renews every `retry_period`; a renewal that has not succeeded within
  `renew_deadline` of the last good one ends its leadership;
- **fencing**: `holds()` is True only until `renew_deadline` after the start of the last
  successful renewal, on this process's monotonic clock. A candidate takes over only
  after it saw the Lease unchanged for `lease_duration` (> `renew_deadline`), so a
  replica cut off from the apiserver (say, on a NotReady node, still running) has
  stopped writing before anyone else can start;
- a replica that lost the lease stays a candidate and can win it again later.

`Leadership.standalone()` is the single-replica mode: it always holds."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

from kubernetes import client
from kubernetes.leaderelection import electionconfig, leaderelection

from modelscale import telemetry
from modelscale.kube import lease

log = logging.getLogger(__name__)

Callback = Callable[[], Coroutine[Any, Any, None]]


@dataclasses.dataclass(frozen=True)
class ElectionSettings:
    lease_name: str
    namespace: str
    identity: str
    lease_duration: int = 8
    """A candidate takes the Lease after seeing it unchanged this long (whole seconds, as
    the Lease's `leaseDurationSeconds`)."""
    renew_deadline: float = 6.0
    """The leader stops acting when it could not renew for this long."""
    retry_period: float = 2.0
    """Seconds between renewals (and between a candidate's attempts)."""


def settings_problem(settings: ElectionSettings) -> str | None:
    """What is wrong with these durations, in one line a user can act on (the client
    library would `sys.exit` on them without saying which flag)."""
    if settings.retry_period < 1:
        return f"--leader-retry-period must be at least 1 s, got {settings.retry_period:g}"
    if settings.renew_deadline <= 1.2 * settings.retry_period:
        return (
            f"--leader-renew-deadline ({settings.renew_deadline:g} s) must exceed 1.2 × "
            f"--leader-retry-period ({settings.retry_period:g} s)"
        )
    if settings.lease_duration <= settings.renew_deadline:
        return (
            f"--leader-lease-duration ({settings.lease_duration} s) must exceed "
            f"--leader-renew-deadline ({settings.renew_deadline:g} s): the gap is what keeps "
            "an old leader from acting alongside the new one"
        )
    if not settings.namespace:
        return (
            "--leader-lease-namespace is empty: set it (or POD_NAMESPACE) to the "
            "operator's namespace"
        )
    return None


def lease_valid(*, renewed_at: float | None, now: float, renew_deadline: float) -> bool:
    """Whether a lease renewed (request sent) at `renewed_at` still lets us act at `now`."""
    return renewed_at is not None and 0.0 <= now - renewed_at < renew_deadline


def identity(*, pod_name: str | None = None) -> str:
    """Unique per process: a restarted container must not pass for its previous self."""
    base = pod_name or os.environ.get("POD_NAME") or socket.gethostname()
    return f"{base}_{uuid.uuid4().hex[:8]}"


class Leadership:
    """The fence (`holds()`, any thread) and the callbacks run on the event loop when this
    replica starts or stops leading."""

    def __init__(
        self,
        *,
        settings: ElectionSettings | None,
        lock: lease.FencedLeaseLock | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self._lock = lock
        self._clock = clock
        self._leading = lock is None  # standalone: always the leader
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed: asyncio.Event | None = None
        self._started: list[Callback] = []
        self._stopped: list[Callback] = []
        self._thread_leading = False  # the election thread's own view

    @classmethod
    def standalone(cls) -> Leadership:
        return cls(settings=None, lock=None)

    @classmethod
    def elect(cls, *, api: client.ApiClient, settings: ElectionSettings) -> Leadership:
        lock = lease.FencedLeaseLock(
            api=api,
            name=settings.lease_name,
            namespace=settings.namespace,
            identity=settings.identity,
        )
        return cls(settings=settings, lock=lock)

    @property
    def identity(self) -> str:
        return self.settings.identity if self.settings else "standalone"

    def holds(self) -> bool:
        if self._lock is None or self.settings is None:
            return True
        return lease_valid(
            renewed_at=self._lock.renewed_at,
            now=self._clock(),
            renew_deadline=self.settings.renew_deadline,
        )

    def subscribe(self, *, started: Callback, stopped: Callback) -> None:
        """Run `started` each time this replica becomes leader (at once if it already is)
        and `stopped` each time it stops."""
        self._started.append(started)
        self._stopped.append(stopped)
        if self._lock is not None and self._leading and self._loop is not None:
            self._loop.create_task(started())

    async def wait(self) -> None:
        """Return once this replica holds a valid lease."""
        while not self.holds():
            if self._changed is None:
                await asyncio.sleep(1.0)
                continue
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout=1.0)

    def start(self) -> None:
        """Begin campaigning (call on the running event loop)."""
        self._loop = asyncio.get_running_loop()
        self._changed = asyncio.Event()
        if self._lock is None:
            telemetry.LEADER.set(1)
            return  # standalone: kopf's own start-up (resume handlers, pod list) is enough
        threading.Thread(target=self._campaign, name="leader-election", daemon=True).start()

    def stop(self, *, release: bool = True) -> None:
        """Stop campaigning and acting (operator shutdown; tests); with `release`, hand the
        lease back so another replica leads within a retry period. Blocks on one API call."""
        if self._lock is None:
            return
        held = self.holds()
        self._lock.close()
        if release and held and self._lock.release():
            log.info("%s: released the lease %s", self.identity, self._lease_name())

    # ------------------------------------------------------------- the election thread

    def _campaign(self) -> None:
        assert self._lock is not None and self.settings is not None
        s = self.settings
        while True:
            config = electionconfig.Config(  # type: ignore[no-untyped-call]
                self._lock,
                s.lease_duration,
                s.renew_deadline,
                s.retry_period,
                onstarted_leading=self._on_started,
                # Told below instead: run() also ends by an exception, which skips it.
                onstopped_leading=lambda: None,
            )
            stopping = False
            try:
                leaderelection.LeaderElection(config).run()  # type: ignore[no-untyped-call]
            except lease.ElectionStoppedError:
                log.info("%s: stopped campaigning for the lease", self.identity)
                stopping = True
            except Exception:
                log.exception("leader election failed; candidate again in %g s", s.retry_period)
            self._lock.forget()
            if self._thread_leading:
                self._thread_leading = False
                self._on_stopped()
            if stopping:
                return
            time.sleep(s.retry_period)

    def _notify(self, callbacks: list[Callback], *, leading: bool) -> None:
        loop = self._loop
        if loop is None:
            return

        def run() -> None:
            self._leading = leading
            telemetry.LEADER.set(1 if leading else 0)
            if self._changed is not None:
                self._changed.set()
            for cb in callbacks:
                loop.create_task(cb())

        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody to tell
            loop.call_soon_threadsafe(run)

    def _on_started(self) -> None:
        self._thread_leading = True
        log.info("%s: leading (lease %s)", self.identity, self._lease_name())
        self._notify(self._started, leading=True)

    def _on_stopped(self) -> None:
        assert self._lock is not None
        self._lock.forget()
        log.warning(
            "%s: lost the lease %s; not acting until it is ours again",
            self.identity,
            self._lease_name(),
        )
        self._notify(self._stopped, leading=False)

    def _lease_name(self) -> str:
        s = self.settings
        return f"{s.namespace}/{s.lease_name}" if s else "-"
