"""spec.serving delivered to a real tritonserver (nvidia-pytriton's 2.51) with the toy LLM,
started with the Triton arguments the Deployment builder writes (control APIs restricted to
the ModelDeployment's key): the operator's load step puts the policy in force before the
warm-up, and nobody without the key can unload the model. No mocks."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from harness import triton
from modelscale.api.v1alpha1 import ModelDeployment, WarmUp
from modelscale.resources import control, deployment
from modelscale.warmup import client, policy, reasons

pytestmark = pytest.mark.triton

ADDR = "127.0.56.1"
KEY = "ab" * control.KEY_BYTES
LEVEL_2 = {"level": 2, "maxQueueSize": 4, "defaultTimeoutMicroseconds": 250_000}
SERVING = {
    "instanceCount": 2,
    "queue": {"maxQueueSize": 32},
    "priorities": {"levels": 2, "defaultLevel": 2, "queues": [LEVEL_2]},
}


def md(serving: dict[str, Any] | None, model: str = "toy_llm") -> ModelDeployment:
    spec: dict[str, Any] = {
        "model": {"name": model, "repository": "/models", "backend": "python"},
        "server": {"drainSeconds": 1, "terminationGracePeriodSeconds": 10},
    }
    if serving is not None:
        spec["serving"] = serving
    return ModelDeployment.model_validate(
        {"metadata": {"name": "toy", "namespace": "ns"}, "spec": spec}
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[triton.LocalTriton]:
    """Triton with the builder's own args; `$(MODELSCALE_CONTROL_KEY)` expanded as the
    kubelet does."""
    args = [
        a.replace(f"$({control.ENV})", KEY)
        for a in deployment.triton_args(md(None))
        if not a.startswith(("--model-repository", "--http-port", "--grpc-port", "--metrics"))
    ]
    args += [f"--model-repository={triton.MODEL_REPOSITORY}"]
    handle = triton.start_local(address=ADDR, workdir=tmp_path_factory.mktemp("srv"), args=args)
    try:
        triton.wait_ready(handle, model="toy_llm", timeout_s=120)
        yield handle
    finally:
        triton.stop(handle)


def target(server: triton.LocalTriton, *, key: str = KEY, model: str = "toy_llm") -> client.Target:
    ports = {f"{name}_port": port for name, port in server.ports.items()}
    return client.Target(host=server.address, model=model, control_key=key, **ports)


def http(
    server: triton.LocalTriton, method: str, path: str, headers: dict[str, str] | None = None
) -> tuple[int, str]:
    data = b"{}" if method == "POST" else None
    request = urllib.request.Request(
        f"http://{server.http_url}/v2{path}", method=method, data=data, headers=headers or {}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def running_config(server: triton.LocalTriton, model: str = "toy_llm") -> dict[str, Any]:
    status, text = http(server, "GET", f"/models/{model}/config")
    assert status == 200, text
    config: dict[str, Any] = json.loads(text)
    return config


SETTINGS = WarmUp(count=3, concurrency=1, timeout_seconds=30)


def test_warm_up_loads_the_policy_and_the_server_runs_it(server: triton.LocalTriton) -> None:
    wanted = md(SERVING)
    assert wanted.spec.serving is not None
    result = client.run_warmup(
        target=target(server), settings=SETTINGS, serving=wanted.spec.serving
    )
    assert result.ok, result.message
    config = running_config(server)
    assert policy.differences(config, wanted.spec.serving) == []
    batching = config["dynamic_batching"]
    assert int(batching["priority_levels"]) == 2
    assert int(batching["default_priority_level"]) == 2
    level2 = batching["priority_queue_policy"]["2"]
    assert int(level2["max_queue_size"]) == 4
    assert int(level2["default_timeout_microseconds"]) == 250_000
    assert level2["timeout_action"] == "REJECT"
    assert int(batching["default_queue_policy"]["max_queue_size"]) == 32
    assert [int(g["count"]) for g in config["instance_group"]] == [2]
    # The model's own inputs survive the override (Triton's override replaces the whole
    # configuration).
    assert config["input"][0]["name"] == "text_input"


def test_without_the_key_nobody_can_unload_the_model(server: triton.LocalTriton) -> None:
    for headers in (None, {control.HEADER: "not-the-key"}):
        status, text = http(server, "POST", "/repository/models/toy_llm/unload", headers)
        assert status == 403, text
        assert control.HEADER in text
    assert http(server, "GET", "/models/toy_llm/ready")[0] == 200
    # Inference, health and the configuration stay open to clients.
    assert http(server, "GET", "/health/ready")[0] == 200


def test_a_load_without_the_key_fails_the_warm_up_and_says_why(
    server: triton.LocalTriton,
) -> None:
    other = md({"instanceCount": 3}).spec.serving
    assert other is not None
    result = client.run_warmup(target=target(server, key="wrong"), settings=SETTINGS, serving=other)
    assert not result.ok
    assert result.reason == reasons.POLICY_NOT_APPLIED
    assert control.HEADER in result.message
    assert http(server, "GET", "/models/toy_llm/ready")[0] == 200


def test_a_policy_triton_refuses_is_the_specs_fault(server: triton.LocalTriton) -> None:
    # A preferred batch size above the model's max_batch_size (0: no batching).
    bad = md({"dynamicBatching": {"preferredBatchSizes": [8]}}).spec.serving
    assert bad is not None
    result = client.run_warmup(target=target(server), settings=SETTINGS, serving=bad)
    assert result.reason == reasons.INVALID_SERVING_POLICY, result.message
    assert "max_batch_size 0" in result.message
    # The model that ran before keeps serving.
    assert http(server, "GET", "/models/toy_llm/ready")[0] == 200
