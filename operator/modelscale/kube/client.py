"""Kubernetes API client configuration: in a pod, the ServiceAccount; else KUBECONFIG."""

from __future__ import annotations

from kubernetes import client, config


def load() -> client.ApiClient:
    try:
        config.load_incluster_config()  # type: ignore[no-untyped-call]
    except config.ConfigException:
        config.load_kube_config()  # type: ignore[no-untyped-call]
    return client.ApiClient()
