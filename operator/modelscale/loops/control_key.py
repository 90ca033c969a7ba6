"""The control key of a ModelDeployment's Triton pods (see `resources.control`): read from
its Secret, generated once when there is none."""

from __future__ import annotations

import secrets
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from modelscale.api.v1alpha1 import ModelDeployment
from modelscale.resources import control


def fetch(api: client.ApiClient, md: ModelDeployment) -> str | None:
    """The key the pods run with, or None when the Secret is missing or malformed."""
    try:
        secret = client.CoreV1Api(api).read_namespaced_secret(control.secret_name(md), md.namespace)
    except ApiException as err:
        if err.status == 404:
            return None
        raise
    return control.key_of(secret.data)


def desired_secret(api: client.ApiClient, md: ModelDeployment) -> dict[str, Any]:
    """The Secret to apply: the existing key kept (running pods read it at start), a new
    random one only when there is none."""
    key = fetch(api, md) or secrets.token_hex(control.KEY_BYTES)
    return control.build_secret(md, key=key)
