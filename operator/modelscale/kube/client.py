"""Kubernetes API client configuration: in a pod, the ServiceAccount; else KUBECONFIG.

Every call made through the client `load` returns has a client-side deadline: the
kubernetes client has none by default, and a black-holed apiserver held calls for
longer than 20 s (a scaling pass, a warm-up slot, a resync all wait on them). kopf's own
calls get theirs from `commands.run.build_settings`."""

from __future__ import annotations

from typing import Any

from kubernetes import client, config
from urllib3.util.retry import Retry

# Seconds a single API call may take, connect to last byte of the headers (urllib3's
# `Timeout(total=...)`): a LIST of a few thousand pods takes a few seconds.
DEFAULT_TIMEOUT_SECONDS = 30.0

# A refused connection (apiserver restarting) is worth two quick retries; a read that
# timed out is not: urllib3's default would retry it 3 times, quadrupling the deadline.
RETRIES = Retry(total=2, connect=2, read=0, status=0, other=0, backoff_factor=0.2)


class ApiClient(client.ApiClient):
    """`kubernetes.client.ApiClient` whose calls without an explicit `_request_timeout`
    get `timeout_seconds`. Every generated API method goes through `call_api`."""

    def __init__(
        self,
        configuration: client.Configuration | None = None,
        *,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    ) -> None:
        if timeout_seconds <= 0:
            raise ValueError(f"the Kubernetes API timeout must be > 0 s, not {timeout_seconds}")
        configuration = configuration or client.Configuration.get_default_copy()
        configuration.retries = RETRIES
        super().__init__(configuration)
        self.timeout_seconds = timeout_seconds

    def call_api(
        self,
        method: str,
        url: str,
        header_params: Any = None,
        body: Any = None,
        post_params: Any = None,
        _request_timeout: Any = None,
    ) -> Any:
        return super().call_api(
            method,
            url,
            header_params,
            body,
            post_params,
            _request_timeout=_request_timeout or self.timeout_seconds,
        )


def load(*, timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS) -> client.ApiClient:
    try:
        config.load_incluster_config()  # type: ignore[no-untyped-call]
    except config.ConfigException:
        config.load_kube_config()  # type: ignore[no-untyped-call]
    return ApiClient(timeout_seconds=timeout_seconds)
