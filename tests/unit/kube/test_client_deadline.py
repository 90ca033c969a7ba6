"""Every Kubernetes call ends at the client's deadline: against a server that accepts the
connection and never answers (a black-holed apiserver, which the real one cannot be made
to be). The same client talks to the real apiserver in every cluster test."""

from __future__ import annotations

import time

import pytest
import urllib3
from kubernetes import client

from harness import faultservers
from modelscale.kube import client as kube_client


def test_a_call_to_an_apiserver_that_never_answers_fails_at_the_deadline() -> None:
    with faultservers.silent() as (host, port):
        conf = client.Configuration(host=f"http://{host}:{port}")
        api = kube_client.ApiClient(conf, timeout_seconds=1.0)
        # The first call imports the client's models lazily (≈ 1 s here): not the deadline's.
        with pytest.raises(urllib3.exceptions.HTTPError):
            client.CoreV1Api(api).list_namespaced_pod("default", _request_timeout=0.1)
        started = time.monotonic()
        with pytest.raises(urllib3.exceptions.HTTPError):
            client.CoreV1Api(api).list_namespaced_pod("default")
        took = time.monotonic() - started
    assert took < 1.5, f"the call took {took:.2f} s"


def test_an_explicit_timeout_still_wins() -> None:
    with faultservers.silent() as (host, port):
        conf = client.Configuration(host=f"http://{host}:{port}")
        api = kube_client.ApiClient(conf, timeout_seconds=30.0)
        started = time.monotonic()
        with pytest.raises(urllib3.exceptions.HTTPError):
            client.CoreV1Api(api).list_namespaced_pod("default", _request_timeout=0.5)
        assert time.monotonic() - started < 1.0


def test_a_timeout_that_is_not_positive_is_refused() -> None:
    with pytest.raises(ValueError, match="must be > 0 s"):
        kube_client.ApiClient(client.Configuration(), timeout_seconds=0)
