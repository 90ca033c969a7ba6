"""The toy LLM on a real tritonserver (nvidia-pytriton wheel) bound to 127.0.77.x.

Behaviour a user of the harness relies on: it answers like a vLLM model, requests really run
concurrently, latency degrades past the knee, the first requests after load are slow, a model
can be made to fail its load, and the vLLM-named metrics are on the metrics port.
"""

from __future__ import annotations

import json
import os
import pathlib
import queue
import signal
import statistics
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from prometheus_client.parser import text_string_to_metric_families
from tritonclient.utils import InferenceServerException

from harness import triton

pytestmark = pytest.mark.triton

MODEL = "toy_llm"
LABELS = {"model": MODEL, "version": "1"}


# --- helpers -----------------------------------------------------------------------------


def _inputs(
    prompt: str, *, max_tokens: int | None, exclude: bool | None
) -> list[httpclient.InferInput]:
    text = httpclient.InferInput("text_input", [1], "BYTES")
    text.set_data_from_numpy(np.array([prompt.encode()], dtype=np.object_))
    inputs = [text]
    if max_tokens is not None:
        params = httpclient.InferInput("sampling_parameters", [1], "BYTES")
        params.set_data_from_numpy(
            np.array([json.dumps({"max_tokens": max_tokens}).encode()], dtype=np.object_)
        )
        inputs.append(params)
    if exclude is not None:
        flag = httpclient.InferInput("exclude_input_in_output", [1], "BOOL")
        flag.set_data_from_numpy(np.array([exclude]))
        inputs.append(flag)
    return inputs


def generate(
    server: triton.LocalTriton,
    prompt: str = "hello there",
    *,
    max_tokens: int | None = 8,
    exclude: bool | None = True,
) -> tuple[str, float]:
    """One HTTP inference; returns (text_output, client-side latency)."""
    client = httpclient.InferenceServerClient(server.http_url, network_timeout=60.0)
    try:
        start = time.monotonic()
        result = client.infer(MODEL, _inputs(prompt, max_tokens=max_tokens, exclude=exclude))
        latency = time.monotonic() - start
    finally:
        client.close()
    out = result.as_numpy("text_output")
    assert out is not None
    return bytes(out.reshape(-1)[0]).decode(), latency


def scrape(server: triton.LocalTriton) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    with urllib.request.urlopen(server.metrics_url, timeout=5) as resp:
        text = resp.read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def sample(
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float],
    name: str,
    labels: dict[str, str] | None = None,
) -> float:
    return samples.get((name, frozenset((labels or LABELS).items())), 0.0)


def eventually(check: Callable[[], bool], *, timeout_s: float = 10.0) -> None:
    """Metrics are applied by the model's metrics thread shortly after the response."""
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def burst(
    server: triton.LocalTriton, *, n: int, max_tokens: int, poll: bool = True
) -> tuple[float, dict[str, float]]:
    """``n`` concurrent requests; returns wall time and peak gauges seen while they ran."""
    peaks = {"vllm:num_requests_running": 0.0, "vllm:num_requests_waiting": 0.0}
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            snap = scrape(server)
            for name, peak in peaks.items():
                peaks[name] = max(peak, sample(snap, name))
            time.sleep(0.02)

    watcher = threading.Thread(target=watch, daemon=True)
    if poll:
        watcher.start()
    start = time.monotonic()
    with ThreadPoolExecutor(n) as pool:
        outputs = list(pool.map(lambda _: generate(server, max_tokens=max_tokens), range(n)))
    wall = time.monotonic() - start
    done.set()
    if poll:
        watcher.join()
    assert all(len(text.split()) == max_tokens for text, _ in outputs)
    return wall, peaks


def mean_tpot_between(
    before: dict[tuple[str, frozenset[tuple[str, str]]], float],
    after: dict[tuple[str, frozenset[tuple[str, str]]], float],
) -> float:
    name = "vllm:time_per_output_token_seconds"
    total = sample(after, f"{name}_sum") - sample(before, f"{name}_sum")
    count = sample(after, f"{name}_count") - sample(before, f"{name}_count")
    assert count > 0
    return total / count


def _start(
    tmp: pathlib.Path, address: str, env: dict[str, str], args: tuple[str, ...] = ()
) -> triton.LocalTriton:
    return triton.start_local(address=address, workdir=tmp, env=env, args=args)


# --- fixtures ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[triton.LocalTriton]:
    handle = _start(tmp_path_factory.mktemp("toy-default"), "127.0.77.1", {})
    try:
        triton.wait_ready(handle)
        yield handle
    finally:
        triton.stop(handle)


COLD = {"TOY_LLM_COLD_REQUESTS": "3", "TOY_LLM_COLD_PENALTY_S": "1.0", "TOY_LLM_LOAD_DELAY_S": "1"}


@pytest.fixture(scope="module")
def cold_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[triton.LocalTriton, float]]:
    handle = _start(tmp_path_factory.mktemp("toy-cold"), "127.0.77.2", COLD)
    try:
        waited = triton.wait_ready(handle)
        yield handle, waited
    finally:
        triton.stop(handle)


# --- tests -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prompt", "max_tokens", "exclude", "expect_words", "expect_prefix"),
    [
        pytest.param("hi there", 5, True, 5, "", id="max-tokens-honoured"),
        pytest.param("hi there", 3, False, 5, "hi there ", id="prompt-echoed-by-default"),
        pytest.param("hi", None, True, 16, "", id="default-max-tokens-16-like-vllm"),
    ],
)
def test_model_answers_with_tokens(
    *,
    server: triton.LocalTriton,
    prompt: str,
    max_tokens: int | None,
    exclude: bool | None,
    expect_words: int,
    expect_prefix: str,
) -> None:
    text, _ = generate(server, prompt, max_tokens=max_tokens, exclude=exclude)
    assert len(text.split()) == expect_words
    assert text.startswith(expect_prefix)


def test_bad_sampling_parameters_are_a_client_error(server: triton.LocalTriton) -> None:
    with pytest.raises(InferenceServerException, match="max_tokens"):
        generate(server, max_tokens=0)


def test_metadata_matches_the_vllm_backend_io(server: triton.LocalTriton) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    try:
        meta = client.get_model_metadata(MODEL)
    finally:
        client.close()
    inputs = {i["name"]: (i["datatype"], i["shape"]) for i in meta["inputs"]}
    assert inputs == {
        "text_input": ("BYTES", [1]),
        "stream": ("BOOL", [1]),
        "sampling_parameters": ("BYTES", [1]),
        "exclude_input_in_output": ("BOOL", [1]),
    }
    assert [(o["name"], o["datatype"]) for o in meta["outputs"]] == [("text_output", "BYTES")]


def test_concurrent_requests_progress_together(server: triton.LocalTriton) -> None:
    tokens, n = 100, 8
    _, single = generate(server, max_tokens=tokens)
    wall, peaks = burst(server, n=n, max_tokens=tokens)
    # Serial execution would show one request at a time and take n x single.
    assert peaks["vllm:num_requests_running"] >= n // 2, peaks
    assert wall < n * single / 2, (wall, single)


def test_per_token_latency_rises_past_the_knee(server: triton.LocalTriton) -> None:
    s0 = scrape(server)
    burst(server, n=2, max_tokens=60, poll=False)
    s1 = scrape(server)
    _, peaks = burst(server, n=40, max_tokens=60)
    s2 = scrape(server)
    low, high = mean_tpot_between(s0, s1), mean_tpot_between(s1, s2)
    # Defaults: 5 ms/token up to 8 in flight; 40 in flight -> 5 + 32 * 0.625 = 25 ms.
    assert high > 2 * low, (low, high)
    assert peaks["vllm:num_requests_waiting"] > 0, peaks


def test_cold_penalty_makes_first_requests_slower(
    cold_server: tuple[triton.LocalTriton, float],
) -> None:
    handle, waited = cold_server
    assert waited >= 1.0  # TOY_LLM_LOAD_DELAY_S: not ready before the model has loaded
    latencies = [generate(handle, max_tokens=10)[1] for _ in range(7)]
    warm = statistics.median(latencies[3:])
    # Penalties 1.0, 0.67, 0.33 s on the first three, then none (warm ~50 ms).
    assert latencies[0] > 3 * warm, latencies
    assert latencies[0] > latencies[2], latencies
    assert max(latencies[3:]) < latencies[0], latencies


def test_failed_load_stops_the_server_by_default(tmp_path: pathlib.Path) -> None:
    handle = _start(tmp_path, "127.0.77.3", {"TOY_LLM_FAIL_LOAD": "1"})
    try:
        with pytest.raises(RuntimeError, match="exited with 1"):
            triton.wait_ready(handle, timeout_s=60)
        assert "TOY_LLM_FAIL_LOAD" in handle.log_path.read_text()
    finally:
        triton.stop(handle)


def test_failed_load_leaves_the_model_not_ready(tmp_path: pathlib.Path) -> None:
    handle = _start(tmp_path, "127.0.77.4", {"TOY_LLM_FAIL_LOAD": "1"}, ("--exit-on-error=false",))
    try:
        deadline = time.monotonic() + 60
        client = httpclient.InferenceServerClient(handle.http_url)
        try:
            while True:
                assert handle.process.poll() is None, handle.log_tail()
                try:
                    index = client.get_model_repository_index()
                except Exception:
                    index = []
                states = {m["name"]: m for m in index}
                if states.get(MODEL, {}).get("state") == "UNAVAILABLE":
                    break
                assert time.monotonic() < deadline, handle.log_tail()
                time.sleep(0.2)
            assert client.is_server_live()
            assert not client.is_model_ready(MODEL)
            assert not client.is_server_ready()  # strict readiness: a failed model
            assert "TOY_LLM_FAIL_LOAD" in states[MODEL]["reason"]
        finally:
            client.close()
    finally:
        triton.stop(handle)


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        pytest.param("vllm:prompt_tokens_total", "counter", id="prompt-tokens"),
        pytest.param("vllm:generation_tokens_total", "counter", id="generation-tokens"),
        pytest.param("vllm:e2e_request_latency_seconds", "histogram", id="e2e-latency"),
        pytest.param("vllm:time_to_first_token_seconds", "histogram", id="ttft"),
        pytest.param("vllm:time_per_output_token_seconds", "histogram", id="tpot"),
        pytest.param("vllm:num_requests_waiting", "gauge", id="waiting"),
        pytest.param("vllm:num_requests_running", "gauge", id="running"),
        pytest.param("nv_inference_request_success", "counter", id="triton-own-metrics-stay"),
    ],
)
def test_metrics_port_exposes_vllm_families(
    server: triton.LocalTriton, name: str, kind: str
) -> None:
    generate(server, "one two three four", max_tokens=4)
    with urllib.request.urlopen(server.metrics_url, timeout=5) as resp:
        text = resp.read().decode()
    assert f"# TYPE {name} {kind}" in text
    # prometheus_client's parser names every counter sample "<name>_total".
    counter = name if name.endswith("_total") else f"{name}_total"
    probe = {"counter": counter, "gauge": name, "histogram": f"{name}_count"}[kind]
    eventually(lambda: (probe, frozenset(LABELS.items())) in scrape(server))
    if kind in ("counter", "histogram"):
        eventually(lambda: sample(scrape(server), probe) > 0)


def test_token_counters_count_words(server: triton.LocalTriton) -> None:
    before = scrape(server)
    generate(server, "a b c d e f g", max_tokens=9)
    names = (
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
        "vllm:e2e_request_latency_seconds_count",
    )

    def delta() -> dict[str, float]:
        after = scrape(server)
        return {n: sample(after, n) - sample(before, n) for n in names}

    eventually(lambda: delta()[names[2]] >= 1)
    assert delta() == dict(zip(names, (7, 9, 1), strict=True))


def test_grpc_infer_works_like_http(server: triton.LocalTriton) -> None:
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        text = grpcclient.InferInput("text_input", [1], "BYTES")
        text.set_data_from_numpy(np.array([b"warm me up"], dtype=np.object_))
        params = grpcclient.InferInput("sampling_parameters", [1], "BYTES")
        params.set_data_from_numpy(np.array([b'{"max_tokens": 6}'], dtype=np.object_))
        result = client.infer(MODEL, [text, params])
    finally:
        client.close()
    out = result.as_numpy("text_output")
    assert out is not None
    assert bytes(out.reshape(-1)[0]).decode().startswith("warm me up ")
    assert len(bytes(out.reshape(-1)[0]).split()) == 3 + 6


def test_grpc_stream_gets_one_final_response(server: triton.LocalTriton) -> None:
    # Not decoupled: a stream=true request over a gRPC stream is answered once, whole.
    answers: queue.Queue[tuple[Any, Any]] = queue.Queue()
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        client.start_stream(callback=lambda result, error: answers.put((result, error)))
        text = grpcclient.InferInput("text_input", [1], "BYTES")
        text.set_data_from_numpy(np.array([b"stream please"], dtype=np.object_))
        stream = grpcclient.InferInput("stream", [1], "BOOL")
        stream.set_data_from_numpy(np.array([True]))
        client.async_stream_infer(MODEL, [text, stream])
        result, error = answers.get(timeout=30)
        client.stop_stream()
    finally:
        client.close()
    assert error is None
    assert len(bytes(result.as_numpy("text_output").reshape(-1)[0]).split()) == 2 + 16
    assert answers.empty()


def test_stop_cleans_shared_memory_of_a_crashed_server(tmp_path: pathlib.Path) -> None:
    address = "127.0.77.5"
    handle = _start(tmp_path, address, {})
    try:
        triton.wait_ready(handle)
        assert list(pathlib.Path("/dev/shm").glob(triton.shm_prefix(address) + "*"))
        os.killpg(handle.process.pid, signal.SIGKILL)  # server and stub die without cleanup
        handle.process.wait(timeout=10)
        assert list(pathlib.Path("/dev/shm").glob(triton.shm_prefix(address) + "*"))
    finally:
        triton.stop(handle)
    assert not list(pathlib.Path("/dev/shm").glob(triton.shm_prefix(address) + "*"))


# --- launch_spec (no server) -------------------------------------------------------------


def _flag(argv: list[str], flag: str) -> list[str]:
    return [a.split("=", 1)[1] for a in argv if a.startswith(flag + "=")]


@pytest.mark.parametrize(
    ("container_args", "expect_repo", "expect_ports", "expect_passthrough"),
    [
        pytest.param(
            ["tritonserver", "--model-repository=s3://bucket/models", "--model-control-mode",
             "explicit", "--load-model=toy_llm"],
            [str(triton.MODEL_REPOSITORY)], ("8000", "8001", "8002"),
            ["--model-control-mode=explicit", "--load-model=toy_llm"],
            id="remote-repository-replaced-by-toy-models",
        ),
        pytest.param(
            ["--model-repository", "/models", "--http-port", "9000", "--grpc-port=9001",
             "--metrics-port=9002", "--metrics-config=summary_latencies=true"],
            [str(triton.MODEL_REPOSITORY)], ("9000", "9001", "9002"),
            ["--metrics-config=summary_latencies=true"],
            id="ports-from-args-both-spellings",
        ),
        pytest.param(
            [f"--model-repository={triton.MODEL_REPOSITORY.parent}", "--http-address=0.0.0.0",
             "--backend-directory=/opt/tritonserver/backends", "--log-verbose=1"],
            [str(triton.MODEL_REPOSITORY.parent)], ("8000", "8001", "8002"),
            ["--log-verbose=1"],
            id="local-repository-kept-addresses-and-backends-ours",
        ),
    ],
)  # fmt: skip
def test_launch_spec_binds_the_address_and_keeps_container_intent(
    *,
    tmp_path: pathlib.Path,
    container_args: list[str],
    expect_repo: list[str],
    expect_ports: tuple[str, str, str],
    expect_passthrough: list[str],
) -> None:
    argv, _ = triton.launch_spec(
        address="198.18.0.10", container_args=container_args, container_env={}, workdir=tmp_path
    )
    assert pathlib.Path(argv[0]).name == "tritonserver" and os.access(argv[0], os.X_OK)
    assert _flag(argv, "--model-repository") == expect_repo
    for kind in ("http", "grpc", "metrics"):
        assert _flag(argv, f"--{kind}-address") == ["198.18.0.10"]
    got_ports = tuple(_flag(argv, f"--{k}-port")[0] for k in ("http", "grpc", "metrics"))
    assert got_ports == expect_ports
    (backends,) = _flag(argv, "--backend-directory")
    assert {p.name for p in (pathlib.Path(backends) / "python").iterdir()} >= {
        "libtriton_python.so",
        "triton_python_backend_stub",
        "triton_python_backend_utils.py",
    }
    assert argv[-len(expect_passthrough) :] == expect_passthrough


def test_launch_spec_environment_is_what_the_stub_needs(tmp_path: pathlib.Path) -> None:
    _, env = triton.launch_spec(
        address="198.18.0.10",
        container_args=[],
        container_env={"TOY_LLM_KNEE": "4", "PATH": "/usr/bin:/bin", "PYTHONPATH": "/elsewhere"},
        workdir=tmp_path,
    )
    venv_bin = pathlib.Path(env["PATH"].split(os.pathsep)[0])
    assert (venv_bin / "python3").exists() and venv_bin.parent.joinpath("pyvenv.cfg").exists()
    assert env["PATH"].endswith("/usr/bin:/bin")
    libs = env["LD_LIBRARY_PATH"].split(os.pathsep)
    assert any(p.endswith("nvidia_pytriton.libs") for p in libs)
    assert any(pathlib.Path(p, "libpython3.11.so.1.0").exists() for p in libs)
    assert env["TOY_LLM_KNEE"] == "4"
    assert "PYTHONPATH" not in env  # the stub must take the venv's site-packages, nothing else
