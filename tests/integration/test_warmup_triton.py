"""Warm-up against a real tritonserver (from nvidia-pytriton) on loopback, with the toy LLM.

No mocks: the server, the Python backend and the model are the real programs. A server that
cannot start fails the test with its log.
"""

from __future__ import annotations

import pathlib
import textwrap
import threading
import urllib.request
from collections.abc import Iterator

import pytest

from harness import triton
from modelscale.api.v1alpha1 import WarmUp, WarmUpProtocol, WarmUpSuccess
from modelscale.warmup import client, reasons

pytestmark = pytest.mark.triton

# Addresses of our own, away from what other suites pick (127.0.0.2 ...).
ADDR_WARM = "127.0.55.1"
ADDR_COLD = "127.0.55.2"
ADDR_FAIL = "127.0.55.3"

COLD_REQUESTS = 6
COLD_PENALTY_S = 1.0

# A decoupled model, as Triton's vLLM backend is: answers only over a gRPC stream.
STREAM_MODEL = "toy_stream"
STREAM_CONFIG = """
name: "toy_stream"
backend: "python"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [ { name: "text_input", data_type: TYPE_STRING, dims: [ 1 ] } ]
output [ { name: "text_output", data_type: TYPE_STRING, dims: [ -1 ] } ]
"""
STREAM_MODEL_PY = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            for word in (b"warm", b"up"):
                out = pb_utils.Tensor("text_output", np.array([word], dtype=np.object_))
                sender.send(pb_utils.InferenceResponse(output_tensors=[out]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
"""


def _start(
    address: str, workdir: pathlib.Path, env: dict[str, str], args: tuple[str, ...] = ()
) -> triton.LocalTriton:
    return triton.start_local(address=address, workdir=workdir, env=env, args=args)


@pytest.fixture(scope="module")
def warm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[triton.LocalTriton]:
    """Toy LLM without cold penalty, plus the decoupled stream model."""
    repo = tmp_path_factory.mktemp("stream-repo")
    (repo / STREAM_MODEL / "1").mkdir(parents=True)
    (repo / STREAM_MODEL / "config.pbtxt").write_text(STREAM_CONFIG)
    (repo / STREAM_MODEL / "1" / "model.py").write_text(textwrap.dedent(STREAM_MODEL_PY))
    server = _start(ADDR_WARM, tmp_path_factory.mktemp("warm"), {}, (f"--model-repository={repo}",))
    try:
        triton.wait_ready(server, model="toy_llm", timeout_s=120)
        triton.wait_ready(server, model=STREAM_MODEL, timeout_s=60)
        yield server
    finally:
        triton.stop(server)


@pytest.fixture
def cold_server(tmp_path: pathlib.Path) -> Iterator[triton.LocalTriton]:
    """Fresh toy LLM whose first requests pay a decaying cold penalty."""
    env = {
        "TOY_LLM_COLD_REQUESTS": str(COLD_REQUESTS),
        "TOY_LLM_COLD_PENALTY_S": str(COLD_PENALTY_S),
    }
    server = _start(ADDR_COLD, tmp_path, env)
    try:
        triton.wait_ready(server, model="toy_llm", timeout_s=120)
        yield server
    finally:
        triton.stop(server)


@pytest.fixture
def failing_server(tmp_path: pathlib.Path) -> Iterator[triton.LocalTriton]:
    """The toy model fails to load; the server itself runs (live, never ready)."""
    # Without --exit-on-error=false Triton exits when a model fails to load (then the pod's
    # container restarts: the handler's crash path); here we test the adapter's path.
    server = _start(ADDR_FAIL, tmp_path, {"TOY_LLM_FAIL_LOAD": "1"}, ("--exit-on-error=false",))
    try:
        _wait_live(server)
        yield server
    finally:
        triton.stop(server)


def _wait_live(server: triton.LocalTriton, timeout_s: float = 120.0) -> None:
    stop = threading.Event()
    url = f"http://{server.http_url}/v2/health/live"
    waited = 0.0
    while waited < timeout_s:
        if server.process.poll() is not None:
            raise RuntimeError(f"tritonserver exited:\n{server.log_tail()}")
        try:
            with urllib.request.urlopen(url, timeout=1.0) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        stop.wait(0.2)
        waited += 0.2
    raise RuntimeError(f"tritonserver on {server.address} never live:\n{server.log_tail()}")


def _target(server: triton.LocalTriton, model: str = "toy_llm") -> client.Target:
    return client.Target(
        host=server.address,
        model=model,
        http_port=server.ports["http"],
        grpc_port=server.ports["grpc"],
        metrics_port=server.ports["metrics"],
    )


@pytest.mark.parametrize(
    "protocol", [pytest.param("HTTP", id="http"), pytest.param("GRPC", id="grpc")]
)
def test_warm_up_succeeds_and_reports_measured_figures(
    warm_server: triton.LocalTriton, protocol: WarmUpProtocol
) -> None:
    settings = WarmUp(protocol=protocol, count=6, concurrency=2)
    result = client.run_warmup(target=_target(warm_server), settings=settings)
    assert result.ok, result.message
    assert result.reason == reasons.WARMED_UP
    assert result.requests >= 6
    assert len(result.latencies) == result.requests
    assert result.median_latency_seconds is not None and result.median_latency_seconds > 0
    assert f"warmed up with {result.requests} requests" in result.message
    # The server really answered them: Triton's own counter moved.
    served = client.fetch_request_count(target=_target(warm_server))
    assert served is not None and served >= result.requests


def test_explicit_requests_with_parameters_are_sent(warm_server: triton.LocalTriton) -> None:
    spec = {
        "warmUp": {
            "protocol": "GRPC",
            "count": 3,
            "concurrency": 1,
            "autoGenerate": True,
            "requests": [
                {
                    "inputs": {
                        "text_input": {"datatype": "BYTES", "shape": [1], "data": ["hello there"]},
                        "sampling_parameters": {
                            "datatype": "BYTES",
                            "shape": [1],
                            "data": ['{"max_tokens": 2}'],
                        },
                    },
                    "outputs": ["text_output"],
                }
            ],
        }
    }
    settings = WarmUp.model_validate(spec["warmUp"])
    result = client.run_warmup(target=_target(warm_server), settings=settings)
    assert result.ok, result.message


def test_unknown_explicit_input_fails_with_a_message(warm_server: triton.LocalTriton) -> None:
    prompt = {"datatype": "BYTES", "shape": [1], "data": ["x"]}
    settings = WarmUp.model_validate(
        {"protocol": "HTTP", "requests": [{"inputs": {"prompt": prompt}}]}
    )
    result = client.run_warmup(target=_target(warm_server), settings=settings)
    assert not result.ok
    assert result.reason == reasons.INVALID_REQUEST
    assert "prompt" in result.message and "text_input" in result.message


def test_decoupled_model_is_warmed_over_a_grpc_stream(warm_server: triton.LocalTriton) -> None:
    # HTTP cannot serve a decoupled model; the adapter switches to a gRPC stream.
    settings = WarmUp(protocol="HTTP", count=4, concurrency=2)
    result = client.run_warmup(target=_target(warm_server, STREAM_MODEL), settings=settings)
    assert result.ok, result.message


def test_cold_model_is_warmed_until_latencies_settle(cold_server: triton.LocalTriton) -> None:
    settings = WarmUp(
        protocol="GRPC",
        count=4,
        concurrency=1,
        success=WarmUpSuccess(stable_last_n=3, max_latency_factor=1.5),
    )
    result = client.run_warmup(target=_target(cold_server), settings=settings)
    assert result.ok, result.message
    # `count` alone (4) would have stopped among the slow requests; it went on until the
    # last N were past the cold ones.
    assert result.requests >= COLD_REQUESTS + settings.success.stable_last_n
    assert result.first_latency_seconds is not None and result.median_latency_seconds is not None
    assert result.first_latency_seconds > settings.success.max_latency_factor * (
        result.median_latency_seconds
    )
    print(
        f"\nCOLD toy_llm (K={COLD_REQUESTS}, penalty {COLD_PENALTY_S}s): "
        f"first {result.first_latency_seconds * 1000:.0f} ms, warmed median "
        f"{result.median_latency_seconds * 1000:.0f} ms, {result.requests} requests in "
        f"{result.duration_seconds:.2f} s; latencies(ms)="
        f"{[round(x * 1000) for x in result.latencies]}"
    )


def test_stop_interrupts_a_warm_up(cold_server: triton.LocalTriton) -> None:
    stop = threading.Event()
    settings = WarmUp(protocol="HTTP", count=1000, concurrency=1)
    timer = threading.Timer(1.5, stop.set)
    timer.start()
    try:
        with pytest.raises(client.StoppedError):
            client.run_warmup(target=_target(cold_server), settings=settings, stop=stop)
    finally:
        timer.cancel()


def test_model_that_fails_to_load_yields_a_failure(failing_server: triton.LocalTriton) -> None:
    settings = WarmUp(protocol="HTTP", timeout_seconds=3.0)
    result = client.run_warmup(target=_target(failing_server), settings=settings)
    assert not result.ok
    assert result.reason == reasons.MODEL_NOT_READY
    # The server answered (it is live): the reason names what was not ready.
    assert "not ready" in result.message and "ConnectionRefused" not in result.message


@pytest.mark.parametrize("protocol", ["HTTP", "GRPC"])
def test_a_request_triton_rejects_ends_as_invalid_warm_up_request(
    warm_server: triton.LocalTriton, protocol: WarmUpProtocol
) -> None:
    """Not the pod's fault: another pod would reject it too, so the verdict is
    InvalidWarmUpRequest (the loop keeps the pod and waits for a fixed spec), not a failed
    warm-up that ends in replacing pods for ever."""
    # Two prompts where the model takes one (dims [1]): the plan cannot know, Triton refuses.
    two = {"datatype": "BYTES", "shape": [2], "data": ["hello", "there"]}
    settings = WarmUp.model_validate(
        {
            "protocol": protocol,
            "count": 3,
            "concurrency": 1,
            "requests": [{"inputs": {"text_input": two}}],
        }
    )
    result = client.run_warmup(target=_target(warm_server), settings=settings)
    assert result.reason == reasons.INVALID_REQUEST, result.message
    assert not result.ok and result.requests == 1  # the first refusal decides
    assert "text_input" in result.message and "spec.warmUp.requests" in result.message
