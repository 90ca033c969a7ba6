"""One Kubernetes API client per operator process, shared by the handlers."""

from __future__ import annotations

import functools

from kubernetes import client

from modelscale.kube import client as kube_client


@functools.cache
def api_client() -> client.ApiClient:
    return kube_client.load()
