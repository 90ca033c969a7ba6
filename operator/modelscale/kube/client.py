"""Kubernetes API client configuration: in a pod, the ServiceAccount; else KUBECONFIG.

Every call made through the client `load` returns has a client-side deadline: the
kubernetes client has none by default, and a black-holed apiserver held calls for
longer than 20 s (a scaling pass, a warm-up slot, a resync all wait on them). kopf's own
calls get theirs from `commands.run.build_settings`."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from kubernetes import client, config
from urllib3.util.retry import Retry

from modelscale import telemetry

# Seconds a single API call may take, connect to last byte of the headers (urllib3's
# `Timeout(total=...)`): a LIST of a few thousand pods takes a few seconds.
DEFAULT_TIMEOUT_SECONDS = 30.0

# A refused connection (apiserver restarting) is worth two quick retries; a read that
# timed out is not: urllib3's default would retry it 3 times, quadrupling the deadline.
RETRIES = Retry(total=2, connect=2, read=0, status=0, other=0, backoff_factor=0.2)


# client-go's defaults are 5 QPS / burst 10, sized for controllers that read from
# informer caches; the operator's calls are mostly writes that change something (a new
# ModelDeployment is ≈ 15 calls), so it gets what Argo CD's controller defaults to.
DEFAULT_QPS = 50.0
DEFAULT_BURST = 100
# The periodic resync has its own, smaller budget: at 1,000 ModelDeployments a full
# resync is ≈ 6,000 calls, and sharing one bucket it delayed the scaling pass's writes.
DEFAULT_RESYNC_QPS = 10.0
POOL_SIZE = 40


class TokenBucket:
    """Client-side rate limit as client-go's (`flowcontrol.NewTokenBucketRateLimiter`):
    `qps` tokens a second, at most `burst` saved up; `take` blocks until one is free.
    Hand-written (20 lines) because the libraries that offer one are asyncio-only or bring
    a storage backend; the clock and sleep are arguments so tests need not wait."""

    def __init__(
        self,
        *,
        qps: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not qps > 0:
            raise ValueError(f"--kube-qps must be > 0, not {qps}")
        if burst < 1:
            raise ValueError(f"--kube-burst must be at least 1, not {burst}")
        self.qps, self.burst = qps, burst
        self._clock, self._sleep = clock, sleep
        self._lock = threading.Lock()
        self._tokens = float(burst)
        self._at = clock()

    def take(self) -> float:
        """Take one token, waiting for it if none is left; returns the seconds waited."""
        with self._lock:
            now = self._clock()
            self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.qps)
            self._at = now
            self._tokens -= 1.0  # may go negative: later callers queue behind this one
            wait = -self._tokens / self.qps if self._tokens < 0 else 0.0
        if wait > 0:
            self._sleep(wait)
        return wait


_VERBS = {"GET": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete", "POST": "create"}


def request_kind(method: str, url: str) -> tuple[str, str]:
    """The apiserver's (verb, resource) of a request, as `apiserver_request_total` names
    them: `list` is a GET of a collection, `get` of one object; a subresource reads
    `pods/status`. Only for counting: anything unexpected is ("other", path)."""
    path = url.split("://", 1)[-1].split("?", 1)[0]
    parts = [p for p in path.split("/")[1:] if p]
    if parts[:1] == ["api"]:
        rest = parts[2:]
    elif parts[:1] == ["apis"]:
        rest = parts[3:]
    else:
        return "other", "/" + "/".join(parts)
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]
    if not rest:
        return "other", "/" + "/".join(parts)
    verb = _VERBS.get(method.upper(), method.lower())
    if len(rest) == 1 and verb == "get":
        verb = "list"
    resource = rest[0] if len(rest) < 3 else f"{rest[0]}/{rest[2]}"
    return verb, resource


class ApiClient(client.ApiClient):
    """`kubernetes.client.ApiClient` whose calls without an explicit `_request_timeout`
    get `timeout_seconds`, and wait for `limiter` (when given) before they are sent.
    Every generated API method goes through `call_api`."""

    def __init__(
        self,
        configuration: client.Configuration | None = None,
        *,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        limiter: TokenBucket | None = None,
    ) -> None:
        if timeout_seconds <= 0:
            raise ValueError(f"the Kubernetes API timeout must be > 0 s, not {timeout_seconds}")
        configuration = configuration or client.Configuration.get_default_copy()
        configuration.retries = RETRIES
        # urllib3 keeps 5 × CPUs connections (10 here); kopf's 32 handler threads and the
        # loops share a client, and every connection over the pool's size was closed after
        # use ("Connection pool is full, discarding connection"): a new TLS handshake per
        # call at 1,000 ModelDeployments.
        configuration.connection_pool_maxsize = max(
            configuration.connection_pool_maxsize or 0, POOL_SIZE
        )
        super().__init__(configuration)
        self.timeout_seconds = timeout_seconds
        self.limiter = limiter

    def call_api(
        self,
        method: str,
        url: str,
        header_params: Any = None,
        body: Any = None,
        post_params: Any = None,
        _request_timeout: Any = None,
    ) -> Any:
        if self.limiter is not None:
            telemetry.KUBE_THROTTLED_SECONDS.inc(self.limiter.take())
        verb, resource = request_kind(method, url)
        telemetry.KUBE_REQUESTS.labels(verb, resource).inc()
        return super().call_api(
            method,
            url,
            header_params,
            body,
            post_params,
            _request_timeout=_request_timeout or self.timeout_seconds,
        )


def load(
    *, timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS, limiter: TokenBucket | None = None
) -> client.ApiClient:
    try:
        config.load_incluster_config()  # type: ignore[no-untyped-call]
    except config.ConfigException:
        config.load_kube_config()  # type: ignore[no-untyped-call]
    return ApiClient(timeout_seconds=timeout_seconds, limiter=limiter)
