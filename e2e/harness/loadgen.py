"""Replay an LLM request trace against Triton the way a gateway would.

Trace format (the Azure traces in ``bench/traces/``, a copy in ``e2e/traces/``): CSV, gzipped or
not, columns ``t_s,input_tokens,output_tokens``, sorted by ``t_s``.

For every trace request, at its (scaled) arrival time, the replay asks ``endpoints()`` for the
CURRENT ready endpoints (``"host:port"`` of Triton's HTTP port), picks one round-robin and sends
one real ``tritonclient`` HTTP inference to the vLLM-shaped model (``toy_llm`` by default): a
prompt of ``input_tokens`` words and ``max_tokens = min(output_tokens, max_output_tokens)``.
With no ready endpoint the request is recorded as ``no_endpoint`` (a gateway's 503) and sent
nowhere. Concurrency is bounded (requests beyond it wait client-side; their ``sent_at`` then
lags their ``scheduled_s``) and every request has a client-side timeout.

``ready_endpoints_from_slices`` reads a Service's EndpointSlices (ready endpoints only, as
kube-proxy and gateways route); ``EndpointPoller`` refreshes any such function in the
background so the replay's per-request lookup costs nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import csv
import dataclasses
import gzip
import io
import itertools
import json
import logging
import pathlib
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from types import TracebackType
from typing import Any, TypedDict, Unpack

import numpy as np
import tritonclient.http as httpclient
import tritonclient.http.aio as aiohttpclient
from kubernetes import client
from kubernetes import config as kube_config
from tritonclient.utils import InferenceServerException

__all__ = [
    "EndpointPoller",
    "ReplayResult",
    "RequestRecord",
    "Summary",
    "TraceRequest",
    "read_trace",
    "ready_endpoints_from_slices",
    "replay",
    "replay_trace",
    "start_replay",
]

log = logging.getLogger(__name__)

OK = "ok"
ERROR = "error"
TIMEOUT = "timeout"
NO_ENDPOINT = "no_endpoint"

Endpoints = Callable[[], Sequence[str]]


# --- trace -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class TraceRequest:
    """One request of a trace; ``t_s`` is the send offset from the replay's start."""

    t_s: float
    input_tokens: int
    output_tokens: int


def read_trace(
    path: pathlib.Path | str,
    *,
    start_s: float = 0.0,
    duration_s: float | None = None,
    max_requests: int | None = None,
    speedup: float = 1.0,
) -> list[TraceRequest]:
    """Requests of ``path`` in ``[start_s, start_s + duration_s)`` (trace time), at most
    ``max_requests``, with offsets rebased to ``start_s`` and divided by ``speedup``."""
    if speedup <= 0:
        raise ValueError(f"speedup must be > 0, got {speedup}")
    path = pathlib.Path(path)
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    end = None if duration_s is None else start_s + duration_s
    out: list[TraceRequest] = []
    for row in csv.DictReader(io.StringIO(raw.decode())):
        t = float(row["t_s"])
        if t < start_s:
            continue
        if end is not None and t >= end:
            break
        if max_requests is not None and len(out) >= max_requests:
            break
        out.append(
            TraceRequest(
                t_s=(t - start_s) / speedup,
                input_tokens=int(row["input_tokens"]),
                output_tokens=int(row["output_tokens"]),
            )
        )
    return out


# --- endpoints ---------------------------------------------------------------------------


def ready_endpoints_from_slices(
    core_or_discovery_api: Any, namespace: str, service_name: str, port_name: str = "http"
) -> list[str]:
    """``host:port`` of the ready endpoints of ``service_name``, from its EndpointSlices.

    Takes a ``kubernetes.client.DiscoveryV1Api`` (or an ``ApiClient`` / ``CoreV1Api``, whose
    ``api_client`` is reused). Only endpoints whose ``conditions.ready`` is true are returned
    (nil counts as ready, as the EndpointSlice API says consumers should read it); terminating
    pods are not ready. Sorted and de-duplicated.
    """
    api = core_or_discovery_api
    if not isinstance(api, client.DiscoveryV1Api):
        api_client = api if isinstance(api, client.ApiClient) else api.api_client
        api = client.DiscoveryV1Api(api_client)
    slices = api.list_namespaced_endpoint_slice(
        namespace, label_selector=f"kubernetes.io/service-name={service_name}"
    )
    found: set[str] = set()
    for eps in slices.items:
        port = next((p.port for p in eps.ports or [] if p.name == port_name), None)
        if port is None:
            continue
        for ep in eps.endpoints or []:
            ready = ep.conditions.ready if ep.conditions is not None else None
            if ready is False:
                continue
            found.update(f"{address}:{port}" for address in ep.addresses or [])
    return sorted(found)


class EndpointPoller:
    """Calls ``fetch`` every ``interval_s`` in a thread; calling the poller returns the latest
    list at once. A failing ``fetch`` keeps the previous list (and logs), as a gateway keeps
    routing on its last known endpoints when the API server hiccups.

    Use as a context manager; the first fetch happens synchronously on entry.
    """

    def __init__(self, fetch: Endpoints, *, interval_s: float = 0.5) -> None:
        self._fetch = fetch
        self._interval_s = interval_s
        self._latest: tuple[str, ...] = ()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __call__(self) -> list[str]:
        return list(self._latest)

    def refresh(self) -> None:
        try:
            self._latest = tuple(self._fetch())
        except Exception:
            log.exception("endpoint refresh failed; keeping %s", self._latest)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval_s):
            self.refresh()

    def start(self) -> EndpointPoller:
        self.refresh()
        self._thread = threading.Thread(target=self._loop, name="endpoint-poller", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> EndpointPoller:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


# --- records and results -----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RequestRecord:
    """What happened to one trace request."""

    index: int
    scheduled_s: float  # offset of its arrival in the replay
    sent_at: float  # Unix time it was sent (or found no endpoint)
    latency_s: float | None  # None when nothing was sent
    endpoint: str | None  # "host:port" that served (or failed) it
    outcome: str  # ok | error | timeout | no_endpoint
    input_tokens: int
    max_tokens: int
    output_tokens: int = 0
    error: str | None = None

    @property
    def pod_ip(self) -> str | None:
        return None if self.endpoint is None else self.endpoint.rsplit(":", 1)[0]


@dataclasses.dataclass(frozen=True)
class Summary:
    count: int
    ok: int
    errors: int  # error + timeout
    timeouts: int
    no_endpoint: int
    p50_s: float | None
    p99_s: float | None
    output_tokens: int
    per_endpoint: dict[str, int]  # successful requests per endpoint
    duration_s: float


@dataclasses.dataclass
class ReplayResult:
    records: list[RequestRecord]
    started_at: float  # Unix time
    finished_at: float

    def summary(self) -> Summary:
        ok = [r for r in self.records if r.outcome == OK]
        latencies = [r.latency_s for r in ok if r.latency_s is not None]
        p50, p99 = (
            (float(np.percentile(latencies, 50)), float(np.percentile(latencies, 99)))
            if latencies
            else (None, None)
        )
        outcomes = Counter(r.outcome for r in self.records)
        return Summary(
            count=len(self.records),
            ok=outcomes[OK],
            errors=outcomes[ERROR] + outcomes[TIMEOUT],
            timeouts=outcomes[TIMEOUT],
            no_endpoint=outcomes[NO_ENDPOINT],
            p50_s=p50,
            p99_s=p99,
            output_tokens=sum(r.output_tokens for r in ok),
            per_endpoint=dict(Counter(r.endpoint for r in ok if r.endpoint is not None)),
            duration_s=self.finished_at - self.started_at,
        )

    def served_by(self, pod_ip: str) -> list[RequestRecord]:
        """Requests sent to ``pod_ip`` (any outcome)."""
        return [r for r in self.records if r.pod_ip == pod_ip]


# --- replay ------------------------------------------------------------------------------


def _inputs(*, prompt: str, max_tokens: int) -> list[httpclient.InferInput]:
    text = httpclient.InferInput("text_input", [1], "BYTES")
    text.set_data_from_numpy(np.array([prompt.encode()], dtype=np.object_))
    params = httpclient.InferInput("sampling_parameters", [1], "BYTES")
    params.set_data_from_numpy(
        np.array([json.dumps({"max_tokens": max_tokens}).encode()], dtype=np.object_)
    )
    exclude = httpclient.InferInput("exclude_input_in_output", [1], "BOOL")
    exclude.set_data_from_numpy(np.array([True]))
    stream = httpclient.InferInput("stream", [1], "BOOL")
    stream.set_data_from_numpy(np.array([False]))
    return [text, params, exclude, stream]


def _prompt(tokens: int) -> str:
    # One word per token: the toy model counts prompt tokens as words.
    return " ".join(itertools.islice(itertools.cycle(("tell", "me", "more", "please")), tokens))


@dataclasses.dataclass(frozen=True)
class _Options:
    model: str
    max_concurrency: int
    timeout_s: float
    max_output_tokens: int
    max_input_tokens: int


class _Runner:
    def __init__(self, requests: Sequence[TraceRequest], endpoints: Endpoints, opts: _Options):
        self.requests = list(requests)
        self.endpoints = endpoints
        self.opts = opts
        self.records: list[RequestRecord] = []
        self.stop_event = threading.Event()
        self._rr = itertools.count()
        self._clients: dict[str, aiohttpclient.InferenceServerClient] = {}

    def _pick(self) -> str | None:
        try:
            current = list(self.endpoints())
        except Exception:
            log.exception("endpoints() failed; counting the request as no_endpoint")
            return None
        if not current:
            return None
        return current[next(self._rr) % len(current)]

    def _client(self, endpoint: str) -> aiohttpclient.InferenceServerClient:
        client = self._clients.get(endpoint)
        if client is None:
            client = aiohttpclient.InferenceServerClient(
                endpoint, conn_limit=self.opts.max_concurrency, conn_timeout=self.opts.timeout_s
            )
            self._clients[endpoint] = client
        return client

    async def _one(self, index: int, req: TraceRequest, sem: asyncio.Semaphore) -> None:
        max_tokens = max(1, min(req.output_tokens, self.opts.max_output_tokens))
        async with sem:
            record = RequestRecord(
                index=index,
                scheduled_s=req.t_s,
                sent_at=time.time(),
                latency_s=None,
                endpoint=self._pick(),
                outcome=NO_ENDPOINT,
                input_tokens=req.input_tokens,
                max_tokens=max_tokens,
            )
            if record.endpoint is None:
                self.records.append(record)
                return
            inputs = _inputs(
                prompt=_prompt(max(1, min(req.input_tokens, self.opts.max_input_tokens))),
                max_tokens=max_tokens,
            )
            start = time.monotonic()
            outcome, error, tokens = OK, None, 0
            try:
                result = await asyncio.wait_for(
                    self._client(record.endpoint).infer(self.opts.model, inputs),
                    timeout=self.opts.timeout_s,
                )
                out = result.as_numpy("text_output")
                text = b"" if out is None or out.size == 0 else out.reshape(-1)[0]
                tokens = len(bytes(text).split())
            except TimeoutError:
                outcome, error = TIMEOUT, f"no answer within {self.opts.timeout_s}s"
            except (InferenceServerException, OSError) as err:
                outcome, error = ERROR, f"{type(err).__name__}: {err}"
            except Exception as err:  # aiohttp's ClientError and friends: still a failed request
                outcome, error = ERROR, f"{type(err).__name__}: {err}"
            self.records.append(
                dataclasses.replace(
                    record,
                    latency_s=time.monotonic() - start,
                    outcome=outcome,
                    output_tokens=tokens,
                    error=error,
                )
            )

    async def run(self) -> None:
        sem = asyncio.Semaphore(self.opts.max_concurrency)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        tasks: list[asyncio.Task[None]] = []
        try:
            for index, req in enumerate(self.requests):
                # Short naps so that stop() takes effect even inside a long trace gap.
                while (delay := t0 + req.t_s - loop.time()) > 0 and not self.stop_event.is_set():
                    await asyncio.sleep(min(delay, 0.2))
                if self.stop_event.is_set():
                    break
                tasks.append(asyncio.create_task(self._one(index, req, sem)))
            await asyncio.gather(*tasks)
        finally:
            for client in self._clients.values():
                with contextlib.suppress(Exception):
                    await client.close()


class ReplayOptions(TypedDict, total=False):
    """How a replay sends its requests; every key is optional, the defaults are
    `_options`'s."""

    model: str
    max_concurrency: int
    timeout_s: float
    max_output_tokens: int
    max_input_tokens: int


def _options(
    *,
    model: str = "toy_llm",
    max_concurrency: int = 64,
    timeout_s: float = 30.0,
    max_output_tokens: int = 128,
    max_input_tokens: int = 4096,
) -> _Options:
    if max_concurrency < 1:
        raise ValueError("max_concurrency must be >= 1")
    return _Options(
        model=model,
        max_concurrency=max_concurrency,
        timeout_s=timeout_s,
        max_output_tokens=max_output_tokens,
        max_input_tokens=max_input_tokens,
    )


def replay(
    requests: Sequence[TraceRequest],
    *,
    endpoints: Endpoints,
    **options: Unpack[ReplayOptions],
) -> ReplayResult:
    """Send ``requests`` at their offsets; block until all are answered or timed out."""
    runner = _Runner(requests, endpoints, _options(**options))
    started = time.time()
    asyncio.run(runner.run())
    return ReplayResult(
        records=sorted(runner.records, key=lambda r: r.index),
        started_at=started,
        finished_at=time.time(),
    )


def replay_trace(
    path: pathlib.Path | str,
    *,
    endpoints: Endpoints,
    speedup: float = 1.0,
    start_s: float = 0.0,
    duration_s: float | None = None,
    max_requests: int | None = None,
    **options: Unpack[ReplayOptions],
) -> ReplayResult:
    """``read_trace`` + ``replay``; ``duration_s`` is in trace time (before ``speedup``)."""
    requests = read_trace(
        path, start_s=start_s, duration_s=duration_s, max_requests=max_requests, speedup=speedup
    )
    return replay(requests, endpoints=endpoints, **options)


class BackgroundReplay:
    """A replay running in its own thread (see ``start_replay``)."""

    def __init__(self, runner: _Runner) -> None:
        self._runner = runner
        self._result: ReplayResult | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="trace-replay", daemon=True)
        self._thread.start()

    def _main(self) -> None:
        started = time.time()
        try:
            asyncio.run(self._runner.run())
        except BaseException as err:
            self._error = err
        self._result = ReplayResult(
            records=sorted(self._runner.records, key=lambda r: r.index),
            started_at=started,
            finished_at=time.time(),
        )

    def records_so_far(self) -> list[RequestRecord]:
        return list(self._runner.records)

    def stop(self) -> None:
        """Send no further requests; those in flight still finish."""
        self._runner.stop_event.set()

    def wait(self, timeout_s: float | None = None) -> ReplayResult:
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            raise TimeoutError(f"replay still running after {timeout_s}s")
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result


def start_replay(
    requests: Sequence[TraceRequest],
    *,
    endpoints: Endpoints,
    **options: Unpack[ReplayOptions],
) -> BackgroundReplay:
    """Like ``replay`` but returns at once; ``.wait()`` gives the result, ``.stop()`` ends it
    early (for tests that scale or restart pods while traffic flows)."""
    return BackgroundReplay(_Runner(requests, endpoints, _options(**options)))


def iter_outcomes(records: Sequence[RequestRecord]) -> Iterator[tuple[str, int]]:
    """(outcome, count) pairs, most common first: handy in assertion messages."""
    yield from Counter(r.outcome for r in records).most_common()


# --- command line ------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """``PYTHONPATH=e2e python -m harness.loadgen --trace FILE (--endpoint H:P ... | --service
    NS/NAME [--kubeconfig F]) [--speedup X] [--start S] [--duration S] [--max-requests N]``;
    prints the summary as JSON (and every record with ``--records``)."""
    parser = argparse.ArgumentParser(prog="harness.loadgen", description=main.__doc__)
    parser.add_argument("--trace", required=True, type=pathlib.Path)
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--endpoint", action="append", help="host:port of Triton HTTP")
    target.add_argument("--service", help="NAMESPACE/NAME: ready EndpointSlice endpoints")
    parser.add_argument("--kubeconfig", default=None)
    parser.add_argument("--port-name", default="http")
    parser.add_argument("--model", default="toy_llm")
    parser.add_argument("--speedup", type=float, default=1.0)
    parser.add_argument("--start", type=float, default=0.0, help="trace offset, s")
    parser.add_argument("--duration", type=float, default=None, help="trace seconds to replay")
    parser.add_argument("--max-requests", type=int, default=None)
    parser.add_argument("--max-concurrency", type=int, default=64)
    parser.add_argument("--max-output-tokens", type=int, default=128)
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("--records", action="store_true")
    args = parser.parse_args(argv)

    poller: EndpointPoller | None = None
    if args.service:
        namespace, _, name = args.service.partition("/")
        new_client: Any = kube_config.new_client_from_config  # untyped in kubernetes
        api = new_client(config_file=args.kubeconfig)
        poller = EndpointPoller(
            lambda: ready_endpoints_from_slices(api, namespace, name, args.port_name)
        ).start()
        endpoints: Endpoints = poller
    else:
        fixed = list(args.endpoint)
        endpoints = lambda: fixed  # noqa: E731
    try:
        result = replay_trace(
            args.trace,
            endpoints=endpoints,
            speedup=args.speedup,
            start_s=args.start,
            duration_s=args.duration,
            max_requests=args.max_requests,
            model=args.model,
            max_concurrency=args.max_concurrency,
            timeout_s=args.timeout,
            max_output_tokens=args.max_output_tokens,
        )
    finally:
        if poller is not None:
            poller.stop()
    out: dict[str, Any] = {"summary": dataclasses.asdict(result.summary())}
    if args.records:
        out["records"] = [dataclasses.asdict(r) for r in result.records]
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
