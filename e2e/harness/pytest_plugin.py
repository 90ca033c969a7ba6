"""pytest fixtures for the real servers: the local cluster, a namespace per test, Prometheus.

Registered for every test tree by the root conftest. Fixtures FAIL (never skip) when a
server cannot be started: a test that silently does not run proves nothing.

- `cluster` (session): with MODELSCALE_E2E_KUBECONFIG set (e2e/kind), that cluster as is;
  otherwise reuses the cluster running from `.cluster/`, or brings one up; a cluster that
  a pytest session started is taken down by the last session using it (several engineers'
  sessions share it), one from `make cluster-up` stays up.
- `kube_api`: a `kubernetes.client.ApiClient` on the admin kubeconfig.
- `namespace`: a fresh namespace per test (its `default` ServiceAccount exists, so pods can
  be created at once), deleted afterwards.
- `prometheus_url`, `kubeconfig_path`; `wait_for(predicate, timeout, what)` polls and fails
  with a message saying what never happened.
"""

from __future__ import annotations

import os
import pathlib
import re
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import pytest
from kubernetes import client, config

from harness import cluster as _cluster
from harness import topology


class WaitFor(Protocol):
    def __call__(
        self, predicate: Callable[[], Any], timeout: float = ..., what: str = ...
    ) -> Any: ...


def wait_for(predicate: Callable[[], Any], timeout: float = 60.0, what: str = "condition") -> Any:
    """Poll `predicate` until it returns something truthy and return that; exceptions
    count as "not yet". Fails the test with `what` (and the last error) on timeout."""
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        try:
            result = predicate()
            if result:
                return result
        except Exception as err:
            last_error = err
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_error!r})" if last_error else ""
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}{detail}")
        time.sleep(0.2)


EXTERNAL_KUBECONFIG = "MODELSCALE_E2E_KUBECONFIG"
EXTERNAL_PROMETHEUS = "MODELSCALE_E2E_PROMETHEUS_URL"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "local_runtime: relies on the local harness's pod runtime (pids of pod processes); "
        "not for kind",
    )
    config.addinivalue_line(
        "markers",
        "cluster_restart: takes the shared local cluster down and up again; runs first in "
        "the session, before other tests leave state on the cluster (the operator install)",
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Stable: the restarting tests keep their order, and so does everything else.
    items.sort(key=lambda item: item.get_closest_marker("cluster_restart") is None)


@pytest.fixture(scope="session")
def cluster() -> Iterator[_cluster.ClusterInfo]:
    external = os.environ.get(EXTERNAL_KUBECONFIG)
    if external:  # e2e/kind: a cluster someone else runs; never started or stopped here
        yield _cluster.ClusterInfo(
            kubeconfig=pathlib.Path(external),
            prometheus_url=os.environ.get(EXTERNAL_PROMETHEUS, ""),
            apiserver_url="",
            state_dir=pathlib.Path(external).parent,
            bin_dir=topology.bin_dir(),
        )
        return
    try:
        with _cluster.session() as info:
            yield info
    except _cluster.ClusterError as err:
        pytest.fail(f"local cluster unavailable: {err}", pytrace=False)


@pytest.fixture(scope="session")
def kubeconfig_path(cluster: _cluster.ClusterInfo) -> pathlib.Path:
    return cluster.kubeconfig


@pytest.fixture(scope="session")
def prometheus_url(cluster: _cluster.ClusterInfo) -> str:
    return cluster.prometheus_url


@pytest.fixture(scope="session")
def kube_api(cluster: _cluster.ClusterInfo) -> Iterator[Any]:
    api = config.new_client_from_config(config_file=str(cluster.kubeconfig))  # type: ignore[no-untyped-call]
    yield api
    api.close()


@pytest.fixture(name="wait_for")
def wait_for_fixture() -> WaitFor:
    return wait_for


def _fresh_namespace(kube_api: Any, request: pytest.FixtureRequest) -> Iterator[str]:
    core: Any = client.CoreV1Api(kube_api)
    base = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"t-{base}-{uuid.uuid4().hex[:5]}"
    core.create_namespace({"metadata": {"name": name, "labels": {"modelscale.dev/test": "true"}}})
    # The ServiceAccount admission plugin rejects pods until the controller has made the
    # namespace's `default` ServiceAccount.
    wait_for(
        lambda: core.read_namespaced_service_account("default", name),
        timeout=30,
        what=f"ServiceAccount default in namespace {name}",
    )
    yield name
    core.delete_namespace(name, propagation_policy="Background")


@pytest.fixture
def namespace(kube_api: Any, request: pytest.FixtureRequest) -> Iterator[str]:
    yield from _fresh_namespace(kube_api, request)


@pytest.fixture(scope="module")
def module_namespace(kube_api: Any, request: pytest.FixtureRequest) -> Iterator[str]:
    """One namespace for a whole test module (tests that share one deployment)."""
    yield from _fresh_namespace(kube_api, request)
