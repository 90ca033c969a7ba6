"""Toy LLM for the modelscale test harness (Triton Python backend).

It behaves like one vLLM engine on one GPU, scaled down so tests stay fast:

- **Continuous batching.** Every request in flight joins one decode loop. Each loop step
  emits one token to every decoding request and lasts

      step = TOKEN_COST + OVERLOAD_COST * max(0, in_flight - KNEE)

  With the defaults (5 ms, knee 8, overload cost 5 ms / 8) per-token latency is flat up to 8
  concurrent requests and then grows linearly: throughput saturates at KNEE / TOKEN_COST =
  1600 tokens/s, as a real GPU does past its batch knee (a public vLLM sweep on an A100 shows
  the same shape with the knee near 8; docs/field-notes.md, "Realistic numbers").
- **Load time**: ``initialize`` sleeps ``TOY_LLM_LOAD_DELAY_S`` (model not ready meanwhile).
- **Cold start**: the first ``TOY_LLM_COLD_REQUESTS`` requests after load pay an extra
  prefill delay that decays linearly, ``COLD_PENALTY * (K - k) / K`` for the k-th request
  (k = 0..K-1): what CUDA-graph capture and cache warm-up do to a real engine. Warm-up matters.
- **Failure**: ``TOY_LLM_FAIL_LOAD=1`` makes ``initialize`` raise: the model never gets ready.
- **Failure switch**: a request whose ``sampling_parameters`` hold ``{"toy_fail": true}``
  makes this server fail every later request at once (Triton error "toy_llm: failure switch
  on"), ``{"toy_fail": false}`` heals it; the switch request itself is answered. Send it to
  one pod's IP to make one pod of several sick (the circuit breaker's test). Failed requests
  are counted in ``toy_llm:request_failures_total``: Triton 2.51 counts a Python-backend
  error response as a success, so its own failure counter never sees them.
- **One request at a time per instance** (``TOY_LLM_EXECUTE_BLOCKS=1``): ``execute`` decodes
  its requests itself (``max_tokens`` x ``TOKEN_COST``) and returns their responses, as a
  classic (non-LLM) model does. Each model instance then serves one request at a time and
  the rest wait in Triton's own scheduler queue, where the dynamic batcher's priority levels
  and queue policies (``spec.serving``) apply. Default: ``execute`` hands requests to the
  decode loop and returns at once (the engine is the queue, as in vLLM).

Environment variables (read once in ``initialize``; the launcher passes the container env):

    TOY_LLM_TOKEN_COST_S       per-token step time at or below the knee       0.005
    TOY_LLM_KNEE               concurrent requests before latency grows      8
    TOY_LLM_OVERLOAD_COST_S    extra step time per request beyond the knee   TOKEN_COST / KNEE
    TOY_LLM_MAX_TOKENS         max_tokens when the request gives none        16 (vLLM's default)
    TOY_LLM_LOAD_DELAY_S       sleep in initialize                           0
    TOY_LLM_COLD_REQUESTS      K, number of slow first requests              0
    TOY_LLM_COLD_PENALTY_S     extra delay of the first request              0
    TOY_LLM_FAIL_LOAD          1/true/yes: initialize raises                 unset
    TOY_LLM_EXECUTE_BLOCKS     1/true/yes: execute decodes and returns       unset

Metrics (Triton metrics port, next to Triton's own ``nv_inference_*``), named and labelled like
Triton's vLLM backend (labels ``model`` and ``version``), histogram buckets as vLLM's:
``vllm:prompt_tokens_total``, ``vllm:generation_tokens_total`` (counters),
``vllm:time_to_first_token_seconds``, ``vllm:time_per_output_token_seconds`` (one observation
per generated token after the first, as vLLM), ``vllm:e2e_request_latency_seconds``
(histograms), ``vllm:num_requests_running`` (min(in_flight, knee)) and
``vllm:num_requests_waiting`` (in_flight beyond the knee: what a real engine would queue).
Metric updates go through a queue to their own thread, as the vLLM backend does, so the
metrics IPC never stalls the decode loop.

Prompt tokens are counted as whitespace-separated words of ``text_input``; generated text is
``max_tokens`` words, so a client counts output tokens with ``len(text.split())`` when it sets
``exclude_input_in_output``.
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils

_VOCAB = ("the", "model", "scales", "ahead", "of", "demand", "and", "warms", "up", "first")
_MAX_TOKENS_LIMIT = 8192

# Bucket boundaries as in vLLM (and Triton's vLLM backend, src/utils/metrics.py).
_TTFT_BUCKETS = [
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
]
_TPOT_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5]
_E2E_BUCKETS = [
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
]


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    return float(raw) if raw else default


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True)
class Config:
    token_cost_s: float
    knee: int
    overload_cost_s: float
    max_tokens: int
    load_delay_s: float
    cold_requests: int
    cold_penalty_s: float
    execute_blocks: bool = False

    @classmethod
    def from_env(cls) -> Config:
        token_cost = _env_float("TOY_LLM_TOKEN_COST_S", 0.005)
        knee = max(1, int(_env_float("TOY_LLM_KNEE", 8)))
        return cls(
            token_cost_s=token_cost,
            knee=knee,
            overload_cost_s=_env_float("TOY_LLM_OVERLOAD_COST_S", token_cost / knee),
            max_tokens=max(1, int(_env_float("TOY_LLM_MAX_TOKENS", 16))),
            load_delay_s=_env_float("TOY_LLM_LOAD_DELAY_S", 0.0),
            cold_requests=max(0, int(_env_float("TOY_LLM_COLD_REQUESTS", 0))),
            cold_penalty_s=_env_float("TOY_LLM_COLD_PENALTY_S", 0.0),
            execute_blocks=_env_flag("TOY_LLM_EXECUTE_BLOCKS"),
        )

    def step_s(self, in_flight: int) -> float:
        return self.token_cost_s + self.overload_cost_s * max(0, in_flight - self.knee)

    def cold_delay_s(self, index: int) -> float:
        if index >= self.cold_requests:
            return 0.0
        return self.cold_penalty_s * (self.cold_requests - index) / self.cold_requests


@dataclass
class _Sequence:
    sender: Any
    prompt: str
    prompt_tokens: int
    max_tokens: int
    exclude_input: bool
    arrival: float
    decode_at: float
    generated: int = 0
    first_token_at: float | None = None
    last_token_at: float = 0.0
    words: list[str] = field(default_factory=list)


class _Metrics:
    """vLLM-named metric families; updates are applied by one background thread."""

    def __init__(self, labels: dict[str, str]) -> None:
        mf = pb_utils.MetricFamily
        # Keep the families referenced for the model's lifetime: a dropped family is deleted.
        self.families = {
            key: mf(name=name, description=description, kind=kind)
            for key, name, description, kind in (
                (
                    "prompt",
                    "vllm:prompt_tokens_total",
                    "Number of prefill tokens processed.",
                    mf.COUNTER,
                ),
                (
                    "generation",
                    "vllm:generation_tokens_total",
                    "Number of generation tokens processed.",
                    mf.COUNTER,
                ),
                (
                    "ttft",
                    "vllm:time_to_first_token_seconds",
                    "Histogram of time to first token in seconds.",
                    mf.HISTOGRAM,
                ),
                (
                    "tpot",
                    "vllm:time_per_output_token_seconds",
                    "Histogram of time per output token in seconds.",
                    mf.HISTOGRAM,
                ),
                (
                    "e2e",
                    "vllm:e2e_request_latency_seconds",
                    "Histogram of end to end request latency in seconds.",
                    mf.HISTOGRAM,
                ),
                (
                    "failures",
                    "toy_llm:request_failures_total",
                    "Requests the failure switch failed (Triton 2.51 counts a Python-backend "
                    "error response as a success, so nv_inference_request_failure misses them).",
                    mf.COUNTER,
                ),
                (
                    "running",
                    "vllm:num_requests_running",
                    "Number of requests currently running on GPU.",
                    mf.GAUGE,
                ),
                (
                    "waiting",
                    "vllm:num_requests_waiting",
                    "Number of requests waiting to be processed.",
                    mf.GAUGE,
                ),
            )
        }
        f = self.families
        self.prompt = f["prompt"].Metric(labels=labels)
        self.generation = f["generation"].Metric(labels=labels)
        self.failures = f["failures"].Metric(labels=labels)
        self.ttft = f["ttft"].Metric(labels=labels, buckets=_TTFT_BUCKETS)
        self.tpot = f["tpot"].Metric(labels=labels, buckets=_TPOT_BUCKETS)
        self.e2e = f["e2e"].Metric(labels=labels, buckets=_E2E_BUCKETS)
        self.running = f["running"].Metric(labels=labels)
        self.waiting = f["waiting"].Metric(labels=labels)
        self._queue: queue.SimpleQueue[tuple[Any, str, float] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name="toy-llm-metrics", daemon=True)
        self._thread.start()

    def put(self, metric: Any, op: str, value: float) -> None:
        self._queue.put((metric, op, value))

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            metric, op, value = item
            try:
                getattr(metric, op)(value)
            except Exception as err:  # a metric error must never stop the model
                pb_utils.Logger.log_warn(f"toy_llm: metric {op} failed: {err}")

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=5)


class _Engine:
    """One continuous-batching decode loop in a thread; answers via response senders."""

    def __init__(self, config: Config, metrics: _Metrics) -> None:
        self.config = config
        self.metrics = metrics
        self._inbox: queue.SimpleQueue[_Sequence | None] = queue.SimpleQueue()
        self._active: list[_Sequence] = []
        self._admitted = 0
        self._lock = threading.Lock()
        self._gauges = (-1, -1)
        self._thread = threading.Thread(target=self._run, name="toy-llm-engine", daemon=True)
        self._thread.start()

    def submit(self, *, sender: Any, prompt: str, max_tokens: int, exclude_input: bool) -> None:
        now = time.monotonic()
        with self._lock:
            index = self._admitted
            self._admitted += 1
        prompt_tokens = max(1, len(prompt.split()))
        self.metrics.put(self.metrics.prompt, "increment", prompt_tokens)
        self._inbox.put(
            _Sequence(
                sender=sender,
                prompt=prompt,
                prompt_tokens=prompt_tokens,
                max_tokens=max_tokens,
                exclude_input=exclude_input,
                arrival=now,
                decode_at=now + self.config.cold_delay_s(index),
            )
        )

    def stop(self) -> None:
        self._inbox.put(None)
        self._thread.join(timeout=5)

    def _admit(self, *, block_s: float | None) -> bool:
        """Move arrivals into the batch; False when asked to stop."""
        try:
            item = self._inbox.get(timeout=block_s) if block_s != 0 else self._inbox.get_nowait()
        except queue.Empty:
            return True
        while True:
            if item is None:
                return False
            self._active.append(item)
            try:
                item = self._inbox.get_nowait()
            except queue.Empty:
                return True

    def _publish_gauges(self) -> None:
        n = len(self._active)
        gauges = (min(n, self.config.knee), max(0, n - self.config.knee))
        if gauges != self._gauges:
            self._gauges = gauges
            self.metrics.put(self.metrics.running, "set", gauges[0])
            self.metrics.put(self.metrics.waiting, "set", gauges[1])

    def _run(self) -> None:
        while True:
            try:
                if not self._step():
                    return
            except Exception as err:
                # A dead loop would leave every later request hanging: fail the batch, go on.
                pb_utils.Logger.log_error(f"toy_llm: decode step failed: {err!r}")
                failed, self._active = self._active, []
                for seq in failed:
                    self._fail(seq, f"toy_llm: decode step failed: {err}")

    def _step(self) -> bool:
        """Admit arrivals, then run one decode step; False when asked to stop."""
        now = time.monotonic()
        if not self._active:
            block: float | None = None
        else:
            next_decode = min(s.decode_at for s in self._active)
            block = 0 if next_decode <= now else next_decode - now
        if not self._admit(block_s=block):
            return False
        self._publish_gauges()
        now = time.monotonic()
        decoding = [s for s in self._active if s.decode_at <= now]
        if not decoding:
            return True
        time.sleep(self.config.step_s(len(self._active)))
        now = time.monotonic()
        for seq in decoding:
            self._emit(seq, now=now)
        self.metrics.put(self.metrics.generation, "increment", len(decoding))
        done = [s for s in decoding if s.generated >= s.max_tokens]
        if done:
            self._active = [s for s in self._active if s.generated < s.max_tokens]
            for seq in done:
                self._finish(seq, now=now)
            self._publish_gauges()
        return True

    @staticmethod
    def _fail(seq: _Sequence, message: str) -> None:
        try:
            seq.sender.send(
                pb_utils.InferenceResponse(error=pb_utils.TritonError(message)),
                flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
            )
        except Exception as err:
            pb_utils.Logger.log_warn(f"toy_llm: could not send an error response: {err}")

    def _emit(self, seq: _Sequence, *, now: float) -> None:
        seq.words.append(_VOCAB[seq.generated % len(_VOCAB)])
        seq.generated += 1
        if seq.first_token_at is None:
            seq.first_token_at = now
            self.metrics.put(self.metrics.ttft, "observe", now - seq.arrival)
        else:
            # Measured, not planned: a starved CPU shows up here as it would on a busy GPU.
            self.metrics.put(self.metrics.tpot, "observe", now - seq.last_token_at)
        seq.last_token_at = now

    def _finish(self, seq: _Sequence, *, now: float) -> None:
        self.metrics.put(self.metrics.e2e, "observe", now - seq.arrival)
        text = " ".join(seq.words)
        if not seq.exclude_input:
            text = f"{seq.prompt} {text}"
        out = pb_utils.Tensor("text_output", np.array([text.encode()], dtype=np.object_))
        try:
            seq.sender.send(
                pb_utils.InferenceResponse(output_tensors=[out]),
                flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
            )
        except Exception as err:  # client gone or server stopping: nothing left to answer
            pb_utils.Logger.log_warn(f"toy_llm: could not send a response: {err}")


def _scalar(request: Any, name: str) -> Any | None:
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    if tensor is None:
        return None
    value = tensor.as_numpy().reshape(-1)[0]
    return value.decode() if isinstance(value, bytes) else value


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        self.config = Config.from_env()
        self.failing = False
        if self.config.load_delay_s > 0:
            time.sleep(self.config.load_delay_s)
        if _env_flag("TOY_LLM_FAIL_LOAD"):
            raise RuntimeError("toy_llm: load failure requested by TOY_LLM_FAIL_LOAD")
        labels = {"model": args["model_name"], "version": args["model_version"]}
        self.metrics = _Metrics(labels)
        self.engine = _Engine(self.config, self.metrics)
        pb_utils.Logger.log_info(f"toy_llm loaded: {self.config}")

    def _immediate(self, request: Any) -> Any | None:
        """The failure switch: its own answer, or the error of a request while it is on."""
        try:
            raw = _scalar(request, "sampling_parameters")
            params = json.loads(raw) if raw else {}
        except ValueError:
            params = {}
        if isinstance(params, dict) and "toy_fail" in params:
            self.failing = bool(params["toy_fail"])
            pb_utils.Logger.log_warn(f"toy_llm: failure switch {'on' if self.failing else 'off'}")
            text = f"failure switch {'on' if self.failing else 'off'}"
            out = pb_utils.Tensor("text_output", np.array([text.encode()], dtype=np.object_))
            return pb_utils.InferenceResponse(output_tensors=[out])
        if self.failing:
            self.metrics.put(self.metrics.failures, "increment", 1)
            return pb_utils.InferenceResponse(
                error=pb_utils.TritonError("toy_llm: failure switch on")
            )
        return None

    def execute(self, requests: list[Any]) -> list[Any] | None:
        if self.config.execute_blocks:
            return [self._immediate(r) or self._execute_now(r) for r in requests]
        # Returning None with responses sent through each request's sender is what lets the
        # next execute() start while earlier requests are still decoding.
        for request in requests:
            sender = request.get_response_sender()
            answer = self._immediate(request)
            if answer is not None:
                sender.send(answer, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                continue
            try:
                prompt, max_tokens, exclude = self._parse(request)
            except (ValueError, TypeError) as err:
                sender.send(
                    pb_utils.InferenceResponse(error=pb_utils.TritonError(str(err))),
                    flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
                )
                continue
            self.engine.submit(
                sender=sender, prompt=prompt, max_tokens=max_tokens, exclude_input=exclude
            )

    def _execute_now(self, request: Any) -> Any:
        """TOY_LLM_EXECUTE_BLOCKS: decode here, one token per TOKEN_COST, and answer."""
        start = time.monotonic()
        try:
            prompt, max_tokens, exclude = self._parse(request)
        except (ValueError, TypeError) as err:
            return pb_utils.InferenceResponse(error=pb_utils.TritonError(str(err)))
        time.sleep(max_tokens * self.config.token_cost_s)
        words = " ".join(_VOCAB[i % len(_VOCAB)] for i in range(max_tokens))
        m = self.metrics
        m.put(m.prompt, "increment", max(1, len(prompt.split())))
        m.put(m.generation, "increment", max_tokens)
        m.put(m.e2e, "observe", time.monotonic() - start)
        text = words if exclude else f"{prompt} {words}"
        out = pb_utils.Tensor("text_output", np.array([text.encode()], dtype=np.object_))
        return pb_utils.InferenceResponse(output_tensors=[out])

    def _parse(self, request: Any) -> tuple[str, int, bool]:
        prompt = _scalar(request, "text_input")
        if not isinstance(prompt, str):
            raise ValueError("text_input must be a string")
        raw = _scalar(request, "sampling_parameters")
        params = json.loads(raw) if raw else {}
        if not isinstance(params, dict):
            raise ValueError("sampling_parameters must be a JSON object")
        max_tokens = int(params.get("max_tokens", self.config.max_tokens))
        if not 1 <= max_tokens <= _MAX_TOKENS_LIMIT:
            raise ValueError(f"max_tokens must be in [1, {_MAX_TOKENS_LIMIT}], got {max_tokens}")
        exclude = _scalar(request, "exclude_input_in_output")
        return prompt, max_tokens, bool(exclude)

    def finalize(self) -> None:
        engine = getattr(self, "engine", None)
        if engine is not None:
            engine.stop()
        metrics = getattr(self, "metrics", None)
        if metrics is not None:
            metrics.close()
