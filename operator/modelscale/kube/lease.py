"""The leader's Lease (coordination.k8s.io/v1) and the fence on every write.

The election itself is the kubernetes client's `kubernetes.leaderelection` (client-go's
algorithm: a candidate takes the Lease only after it saw the holder's record unchanged
for a whole `leaseDuration`, writes go through `replace` with the read resourceVersion, so
two candidates cannot both win one round). Two things it does not give, added here:

- **when our lease ends**, measured on our own monotonic clock from the start of our
  last successful write: `FencedLeaseLock.renewed_at`;
- **a fence**: `fence_writes` makes an ApiClient refuse every write (anything but GET/HEAD/OPTIONS)
  unless the fence says we still hold a valid lease. Every write path of the operator
  goes through this one client, so none of them needs to remember the check."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

log = logging.getLogger(__name__)


class NotLeaderError(RuntimeError):
    """A write was refused because this replica does not hold a valid lease."""


class ElectionStoppedError(RuntimeError):
    """Raised through the election library's loops once `FencedLeaseLock.close()` ran."""


class FencedLeaseLock(LeaseLock):
    """The client's LeaseLock on our own ApiClient, remembering when our last successful
    create/renew *started* (a lease is valid from the moment the request left, not from
    its answer: the apiserver may have stored it any time in between)."""

    def __init__(
        self,
        *,
        api: client.ApiClient,
        name: str,
        namespace: str,
        identity: str,
        request_timeout: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(name, namespace, identity)  # type: ignore[no-untyped-call]
        self.api_instance = client.CoordinationV1Api(api)
        # The library sends its Lease calls without a timeout: one request to a black-holed
        # apiserver would hang the election thread past any deadline. `api` is the
        # election's own client, so bounding its calls touches nothing else.
        send = api.rest_client.request

        def bounded(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            kwargs["_request_timeout"] = request_timeout  # shorter than any renew deadline
            return send(method, url, *args, **kwargs)  # type: ignore[no-untyped-call]

        api.rest_client.request = bounded  # type: ignore[method-assign]
        self._clock = clock
        self._lock = threading.Lock()
        self._renewed_at: float | None = None
        self._closed = False

    @property
    def renewed_at(self) -> float | None:
        with self._lock:
            return self._renewed_at

    def forget(self) -> None:
        """We lost (or gave up) the lease: nothing before this counts any more."""
        with self._lock:
            self._renewed_at = None

    def close(self) -> None:
        """Stop campaigning: every later call raises `ElectionStoppedError` out of the library's
        loops (they have no stop of their own)."""
        with self._lock:
            self._closed = True
            self._renewed_at = None

    def release(self) -> bool:
        """Give the lease up (holder cleared) if we still hold it, so that a follower takes
        it at its next try instead of after a whole lease duration (a rolling update of the
        operator). Read, then replace with that resourceVersion: if anyone else wrote in
        between, the apiserver refuses it and nothing changes."""
        try:
            held = self.api_instance.read_namespaced_lease(self.name, self.namespace)
            if held.spec is None or held.spec.holder_identity != self.identity:
                return False
            held.spec.holder_identity = None
            self.api_instance.replace_namespaced_lease(
                name=self.name, namespace=self.namespace, body=held
            )
        except Exception:  # gone, replaced or unreachable: the lease simply expires
            return False
        return True

    def _check_open(self) -> None:
        with self._lock:
            if self._closed:
                raise ElectionStoppedError("leader election stopped")

    def get(self, name: str, namespace: str) -> Any:
        self._check_open()
        try:
            return super().get(name, namespace)  # type: ignore[no-untyped-call]
        except Exception as err:
            # The library catches only ApiException here; a connection error would end the
            # election at once instead of being retried until the renew deadline. (False,
            # err) is its "could not read, try again" answer.
            log.info("reading lease %s/%s failed: %s", namespace, name, err)
            return False, err

    def _timed(self, write: Callable[[], bool]) -> bool:
        self._check_open()
        started = self._clock()
        try:
            ok = write()
        except Exception as err:  # connection errors, timeouts: a failed try, as a 409 is
            log.info("writing lease %s/%s failed: %s", self.namespace, self.name, err)
            ok = False
        if ok:
            with self._lock:
                # A renewal that was in flight when `close` ran must not bring the lease
                # back: a stopped replica never counts as holding it.
                if not self._closed:
                    self._renewed_at = started
        return ok

    def create(self, name: str, namespace: str, election_record: Any) -> bool:
        return self._timed(
            lambda: bool(super(FencedLeaseLock, self).create(name, namespace, election_record))  # type: ignore[no-untyped-call]
        )

    def update(self, name: str, namespace: str, updated_record: Any) -> bool:
        return self._timed(
            lambda: bool(super(FencedLeaseLock, self).update(name, namespace, updated_record))  # type: ignore[no-untyped-call]
        )


def fence_writes(api: client.ApiClient, *, fence: Callable[[], bool]) -> client.ApiClient:
    """Make `api` refuse every write (anything but GET/HEAD/OPTIONS) with `NotLeaderError`
    while `fence()` is False; returns `api`. Reads and watches always pass: a follower
    keeps its view of the cluster warm. It wraps the client's transport, so it composes
    with whatever the client does above it (timeouts, retries)."""
    send = api.rest_client.request

    def fenced(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        if method.upper() not in READ_METHODS and not fence():
            raise NotLeaderError(
                f"refused {method} {url.split('?', maxsplit=1)[0]}: this replica does not "
                "hold the leader lease"
            )
        return send(method, url, *args, **kwargs)  # type: ignore[no-untyped-call]

    api.rest_client.request = fenced  # type: ignore[method-assign]
    return api
