"""The tritonclient adapter: warm one Triton server up with real inference requests.

Blocking code (tritonclient's HTTP client is gevent-based, its gRPC client blocks): call it
from a thread, never from an async handler. What to send and when to stop is decided by the
pure `warmup.inputs` and `warmup.verdict`; this module only talks to the server and measures.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from prometheus_client.parser import text_string_to_metric_families

from modelscale.api.v1alpha1 import Serving, WarmUp, WarmUpProtocol
from modelscale.resources import control
from modelscale.warmup import inputs, policy, reasons, verdict

log = logging.getLogger(__name__)

POLL_SECONDS = 0.5
# Longest single health or metadata call: a server that accepts and never answers (gRPC
# waits forever without a deadline) must neither outlive `timeoutSeconds` nor keep a stop
# request waiting for long. A pod slower than this to answer a health check is retried.
CALL_SECONDS = 2.0


class StoppedError(Exception):
    """The caller asked the warm-up to stop (its pod is going away)."""


@dataclass(frozen=True)
class Target:
    """Where the model is served: the pod IP and Triton's ports."""

    host: str
    model: str
    http_port: int = 8000
    grpc_port: int = 8001
    metrics_port: int = 8002
    model_version: str = ""
    control_key: str = field(default="", repr=False)
    """Key of Triton's restricted model-repository API (`resources.control`)."""


class _Client(Protocol):
    def is_server_live(self) -> bool: ...
    def is_server_ready(self) -> bool: ...
    def is_model_ready(self, model_name: str, model_version: str = "") -> bool: ...
    def close(self) -> None: ...


def _url(target: Target, protocol: WarmUpProtocol) -> str:
    port = target.http_port if protocol == "HTTP" else target.grpc_port
    host = f"[{target.host}]" if ":" in target.host else target.host
    return f"{host}:{port}"


def _left(deadline: float) -> float:
    """Seconds one call may take before `deadline` (time.monotonic): at most CALL_SECONDS."""
    return max(0.05, min(CALL_SECONDS, deadline - time.monotonic()))


def _connect(target: Target, protocol: WarmUpProtocol, timeout: float) -> Any:
    if protocol == "HTTP":
        import tritonclient.http as httpclient  # noqa: PLC0415 (gevent: import only if used)

        return httpclient.InferenceServerClient(
            _url(target, protocol), connection_timeout=timeout, network_timeout=timeout
        )
    import tritonclient.grpc as grpcclient  # noqa: PLC0415

    return grpcclient.InferenceServerClient(_url(target, protocol))


def _numpy(tensor: inputs.Tensor) -> Any:
    from tritonclient.utils import triton_to_np_dtype  # noqa: PLC0415

    dtype = np.object_ if tensor.datatype == "BYTES" else triton_to_np_dtype(tensor.datatype)
    return np.array(list(tensor.values), dtype=dtype).reshape(tensor.shape)


def _build_inputs(template: inputs.RequestTemplate, protocol: WarmUpProtocol) -> tuple[Any, Any]:
    if protocol == "HTTP":
        import tritonclient.http as mod  # noqa: PLC0415
    else:
        import tritonclient.grpc as mod  # noqa: PLC0415
    infer_inputs = []
    for tensor in template.tensors:
        inp = mod.InferInput(tensor.name, list(tensor.shape), tensor.datatype)
        inp.set_data_from_numpy(_numpy(tensor))
        infer_inputs.append(inp)
    outputs = [mod.InferRequestedOutput(name) for name in template.outputs] or None
    return infer_inputs, outputs


def _wait_ready(
    *, target: Target, protocol: WarmUpProtocol, deadline: float, stop: threading.Event
) -> tuple[Any, str]:
    """A connected client once server and model are ready; raises TimeoutError with the
    last thing that was not ready."""
    last = "not tried"
    client: Any = None
    try:
        while True:
            if stop.is_set():
                raise StoppedError
            try:
                if client is None:
                    client = _connect(target, protocol, timeout=_left(deadline))
                # HTTP's deadline is the connection's (set above); gRPC's is per call.
                per_call = {} if protocol == "HTTP" else {"client_timeout": _left(deadline)}
                if not client.is_server_live(**per_call):
                    last = "server not live"
                elif not client.is_server_ready(**per_call):
                    last = "server not ready"
                elif not client.is_model_ready(target.model, target.model_version, **per_call):
                    last = f"model {target.model!r} not ready"
                else:
                    ready_client, client = client, None
                    return ready_client, last
            except Exception as err:  # connection refused, DNS, gRPC UNAVAILABLE, ...
                last = f"{type(err).__name__}: {str(err)[:200]}"
                if client is not None:
                    client.close()
                    client = None
            if time.monotonic() >= deadline:
                raise TimeoutError(last)
            stop.wait(POLL_SECONDS)
    finally:
        if client is not None:
            client.close()


def _metadata(
    client: Any, *, target: Target, protocol: WarmUpProtocol, timeout: float
) -> tuple[Any, Any]:
    if protocol == "HTTP":  # the connection's own timeouts bound these
        return (
            client.get_model_metadata(target.model, target.model_version),
            client.get_model_config(target.model, target.model_version),
        )
    return (
        client.get_model_metadata(
            target.model, target.model_version, as_json=True, client_timeout=timeout
        ),
        client.get_model_config(
            target.model, target.model_version, as_json=True, client_timeout=timeout
        ),
    )


Sender = Callable[[inputs.RequestTemplate, str], None]


def _unary_sender(target: Target, protocol: WarmUpProtocol, timeout: float) -> tuple[Sender, Any]:
    client = _connect(target, protocol, timeout=timeout)

    def send(template: inputs.RequestTemplate, request_id: str) -> None:
        infer_inputs, outputs = _build_inputs(template, protocol)
        params = dict(template.parameters) or None
        # Only the gRPC client takes a per-call timeout (HTTP's is set on the connection).
        per_call: dict[str, float] = {} if protocol == "HTTP" else {"client_timeout": timeout}
        client.infer(
            target.model,
            infer_inputs,
            model_version=target.model_version,
            outputs=outputs,
            request_id=request_id,
            parameters=params,
            **per_call,
        )

    return send, client


def _stream_sender(target: Target, timeout: float) -> tuple[Sender, Any]:
    """Decoupled models (Triton's vLLM backend) answer only over a gRPC stream: send one
    request, read responses until Triton's empty final response."""
    import tritonclient.grpc as grpcclient  # noqa: PLC0415

    client = grpcclient.InferenceServerClient(_url(target, "GRPC"))
    responses: queue.Queue[tuple[Any, Any]] = queue.Queue()
    client.start_stream(callback=lambda result, error: responses.put((result, error)))

    def send(template: inputs.RequestTemplate, request_id: str) -> None:
        infer_inputs, outputs = _build_inputs(template, "GRPC")
        client.async_stream_infer(
            target.model,
            infer_inputs,
            model_version=target.model_version,
            outputs=outputs,
            request_id=request_id,
            enable_empty_final_response=True,
            parameters=dict(template.parameters) or None,
        )
        end = time.monotonic() + timeout
        while True:
            try:
                result, error = responses.get(timeout=max(0.0, end - time.monotonic()))
            except queue.Empty:
                raise TimeoutError(f"no final response within {timeout:.0f} s") from None
            if error is not None:
                raise error
            final = result.get_response().parameters.get("triton_final_response")
            if final is not None and final.bool_param:
                return

    class _Closer:
        def close(self) -> None:
            client.stop_stream(cancel_requests=True)
            client.close()

    return send, _Closer()


def _send_until_settled(
    *,
    target: Target,
    protocol: WarmUpProtocol,
    decoupled: bool,
    templates: tuple[inputs.RequestTemplate, ...],
    settings: WarmUp,
    stop: threading.Event,
    started: float,
) -> verdict.WarmupResult:
    """Send requests with `concurrency` workers (one client each: tritonclient's clients
    are not thread-safe) until the plan's verdict is in."""
    lock = threading.Lock()
    samples: list[verdict.Sample] = []
    verdicts: list[verdict.WarmupResult] = []
    issued = 0
    limit = verdict.budget(settings=settings)

    def claim() -> int | None:
        nonlocal issued
        with lock:
            if verdicts or issued >= limit or stop.is_set():
                return None
            issued += 1
            return issued - 1

    def worker() -> None:
        if decoupled:
            send, closer = _stream_sender(target, settings.timeout_seconds)
        else:
            send, closer = _unary_sender(target, protocol, settings.timeout_seconds)
        try:
            while (index := claim()) is not None:
                template = templates[index % len(templates)]
                t0 = time.perf_counter()
                try:
                    send(template, f"warm-up-{index}")
                    sample = verdict.Sample(ok=True, latency_seconds=time.perf_counter() - t0)
                except Exception as err:
                    sample = verdict.Sample(
                        ok=False,
                        latency_seconds=time.perf_counter() - t0,
                        error=f"{type(err).__name__}: {err}",
                        status=_status_of(err),
                    )
                with lock:
                    samples.append(sample)
                    if not verdicts:
                        result = verdict.judge(
                            samples=samples,
                            settings=settings,
                            duration_seconds=time.monotonic() - started,
                        )
                        if result is not None:
                            verdicts.append(result)
        finally:
            closer.close()

    workers = max(1, min(settings.concurrency, limit))
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="warmup-req")
    futures = [pool.submit(worker) for _ in range(workers)]
    try:
        # A stop is honoured at once, not after the requests in flight (each may take
        # `timeoutSeconds`): the workers see it before their next request and end alone.
        while not stop.is_set() and not all(f.done() for f in futures):
            wait(futures, timeout=POLL_SECONDS)
        if stop.is_set() and not verdicts:
            raise StoppedError
        for future in futures:
            if future.done():
                future.result()  # a worker's own bug, not a request's failure: raise it
    finally:
        pool.shutdown(wait=False)
    if verdicts:
        return verdicts[0]
    # Every worker stopped without a verdict: only possible if the budget was empty.
    return verdict.failure(
        reason=reasons.NOT_STABLE,
        message="no warm-up requests were sent",
        samples=samples,
        duration_seconds=time.monotonic() - started,
    )


def _load_with_policy(
    *, target: Target, serving: Serving, timeout: float, started: float
) -> verdict.WarmupResult | None:
    """Reload the model with `serving` over its running configuration (Triton's load API
    with a config override, sent with the control key), unless already in force, and check
    the configuration the server then reports. None on success, else the failure."""
    import tritonclient.http as httpclient  # noqa: PLC0415
    from tritonclient.utils import InferenceServerException  # noqa: PLC0415

    def failed(reason: str, message: str) -> verdict.WarmupResult:
        return verdict.failure(
            reason=reason, message=message, duration_seconds=time.monotonic() - started
        )

    client = httpclient.InferenceServerClient(
        _url(target, "HTTP"), connection_timeout=min(timeout, 10.0), network_timeout=timeout
    )
    try:
        running = client.get_model_config(target.model, target.model_version)
        try:
            override = policy.overlay(running, serving)
        except policy.PolicyError as err:
            return failed(reasons.INVALID_SERVING_POLICY, str(err))
        if not policy.differences(running, serving):
            return None
        headers = {control.HEADER: target.control_key} if target.control_key else None
        try:
            client.load_model(target.model, headers=headers, config=json.dumps(override))
        except InferenceServerException as err:
            text = (
                f"Triton refused to load model {target.model!r} with spec.serving: {err} "
                "(Triton's log on the pod has the reason)"
            )
            # 400: the server validated the configuration and refused it (the spec's fault);
            # anything else (403 without the key, a timeout) is not the spec's.
            if str(err.status()) == "400":
                return failed(reasons.INVALID_SERVING_POLICY, text)
            return failed(reasons.POLICY_NOT_APPLIED, text)
        loaded = client.get_model_config(target.model, target.model_version)
        left = policy.differences(loaded, serving)
        if left:
            return failed(
                reasons.POLICY_NOT_APPLIED,
                f"model {target.model!r} loaded, but its configuration differs from "
                f"spec.serving: {'; '.join(left)}",
            )
        log.info("model %s at %s loaded with spec.serving", target.model, target.host)
        return None
    except InferenceServerException as err:
        return failed(reasons.POLICY_NOT_APPLIED, f"reading model {target.model!r}: {err}")
    finally:
        client.close()


def run_warmup(
    *,
    target: Target,
    settings: WarmUp,
    stop: threading.Event | None = None,
    serving: Serving | None = None,
    load_timeout_seconds: float = 600.0,
) -> verdict.WarmupResult:
    """Wait for the server and model, load the model with `serving` (if set), read the
    metadata, and send warm-up requests until the plan says the model has settled (or
    failed). Never raises for a server problem: the result carries the reason. Raises
    `StoppedError` if `stop` is set meanwhile."""
    stop = stop or threading.Event()
    started = time.monotonic()
    protocol = settings.protocol
    try:
        client, _ = _wait_ready(
            target=target,
            protocol=protocol,
            deadline=started + settings.timeout_seconds,
            stop=stop,
        )
    except TimeoutError as err:
        return verdict.failure(
            reason=reasons.MODEL_NOT_READY,
            message=(
                f"model {target.model!r} at {_url(target, protocol)} not ready after "
                f"{settings.timeout_seconds:.0f} s: {err}"
            ),
            duration_seconds=time.monotonic() - started,
        )
    if serving is not None:
        client.close()
        refused = _load_with_policy(
            target=target, serving=serving, timeout=load_timeout_seconds, started=started
        )
        if refused is not None:
            return refused
        try:
            client, _ = _wait_ready(
                target=target,
                protocol=protocol,
                deadline=time.monotonic() + settings.timeout_seconds,
                stop=stop,
            )
        except TimeoutError as err:
            return verdict.failure(
                reason=reasons.MODEL_NOT_READY,
                message=f"model {target.model!r} not ready after loading spec.serving: {err}",
                duration_seconds=time.monotonic() - started,
            )
    try:
        metadata, config = _metadata(
            client, target=target, protocol=protocol, timeout=settings.timeout_seconds
        )
    except Exception as err:
        return verdict.failure(
            reason=reasons.MODEL_NOT_READY,
            message=f"cannot read the metadata of model {target.model!r}: {err}",
            duration_seconds=time.monotonic() - started,
        )
    finally:
        client.close()
    try:
        templates = inputs.plan_requests(
            settings=settings, inputs=inputs.model_inputs(metadata, _as_dict(config))
        )
    except inputs.PlanError as err:
        return verdict.failure(
            reason=reasons.INVALID_REQUEST,
            message=str(err),
            duration_seconds=time.monotonic() - started,
        )
    decoupled = inputs.is_decoupled(_as_dict(config))
    if decoupled and protocol == "HTTP":
        log.info("model %s is decoupled: warming it up over a gRPC stream", target.model)
    return _send_until_settled(
        target=target,
        protocol="GRPC" if decoupled else protocol,
        decoupled=decoupled,
        templates=templates,
        settings=settings,
        stop=stop,
        started=started,
    )


def _status_of(err: Exception) -> str:
    """tritonclient's InferenceServerException carries the HTTP status ("400") or the gRPC
    code ("StatusCode.INVALID_ARGUMENT"); anything else has none."""
    status = getattr(err, "status", None)
    return str(status() or "") if callable(status) else ""


def _as_dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def fetch_request_count(*, target: Target, timeout: float = 2.0) -> float | None:
    """Successful inference requests served by the model (all models if `target.model` is
    empty) so far: Triton's counter `nv_inference_request_success`, from the metrics port;
    None if unreachable."""
    url = f"http://{target.host}:{target.metrics_port}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            text = resp.read().decode("utf-8", errors="replace")
    except OSError:
        return None
    total = None
    for family in text_string_to_metric_families(text):
        if family.name != "nv_inference_request_success":
            continue
        for sample in family.samples:
            if not target.model or sample.labels.get("model") == target.model:
                total = (total or 0.0) + sample.value
    return total
