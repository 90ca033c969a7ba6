"""Offered load in priority classes against Triton, open loop, and what each class saw.

Each class sends requests to the toy LLM at a fixed mean rate (Poisson arrivals, seeded),
with its Triton `priority` and its own `max_tokens`, whatever the server does: an overload
test must not slow its own arrivals down when the server is slow (a closed loop would). A
request ends one of three ways, and every one is recorded: answered, refused by Triton with
its error (queue full, timeout expired), or given up client-side after `client_timeout_s`
(what a user who waits no longer sees; counted as a miss, never silently dropped).

Endpoints come from a callable (a Service's ready EndpointSlices), looked up per request,
round-robin, as a gateway routes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import math
import time
from collections.abc import Callable, Sequence

import numpy as np
import tritonclient.http.aio as aiohttpclient
from tritonclient.utils import InferenceServerException

__all__ = ["ClassLoad", "ClassReport", "Outcome", "report", "run"]


@dataclasses.dataclass(frozen=True)
class ClassLoad:
    name: str
    rate_per_s: float
    priority: int  # Triton's request priority; 0: the model's default level
    max_tokens: int


@dataclasses.dataclass(frozen=True)
class Outcome:
    klass: str
    sent_at: float
    seconds: float
    status: str  # "ok", "rejected" (Triton refused, with its error) or "client-timeout"
    error: str = ""


@dataclasses.dataclass(frozen=True)
class ClassReport:
    name: str
    requests: int
    ok: int
    rejected: int
    client_timeouts: int
    p99_ok_seconds: float  # NaN when nothing was answered
    within_slo: float  # answered within the SLO / all requests of the class
    max_seconds_to_rejection: float  # 0 when nothing was rejected
    errors: tuple[str, ...]  # distinct Triton errors of refused requests

    def line(self) -> str:
        return (
            f"{self.name}: {self.requests} requests, ok {self.ok}, rejected {self.rejected} "
            f"({100 * self.rejected / max(1, self.requests):.0f} %), client timeouts "
            f"{self.client_timeouts}, P99 {self.p99_ok_seconds:.3f} s, within SLO "
            f"{100 * self.within_slo:.0f} %, max time to a rejection "
            f"{self.max_seconds_to_rejection:.3f} s, errors {list(self.errors)}"
        )


def _inputs(max_tokens: int) -> list[aiohttpclient.InferInput]:
    text = aiohttpclient.InferInput("text_input", [1], "BYTES")
    text.set_data_from_numpy(np.array([b"overload test prompt"], dtype=np.object_))
    params = aiohttpclient.InferInput("sampling_parameters", [1], "BYTES")
    params.set_data_from_numpy(
        np.array([json.dumps({"max_tokens": max_tokens}).encode()], dtype=np.object_)
    )
    return [text, params]


async def _run(
    classes: Sequence[ClassLoad],
    *,
    endpoints: Callable[[], Sequence[str]],
    duration_s: float,
    client_timeout_s: float,
    model: str,
    seed: int,
) -> list[Outcome]:
    rng = np.random.default_rng(seed)
    arrivals: list[tuple[float, ClassLoad]] = []
    for klass in classes:
        t = 0.0
        while True:
            t += float(rng.exponential(1.0 / klass.rate_per_s))
            if t >= duration_s:
                break
            arrivals.append((t, klass))
    arrivals.sort(key=lambda item: item[0])
    clients: dict[str, aiohttpclient.InferenceServerClient] = {}
    turn = itertools.count()
    outcomes: list[Outcome] = []

    async def one(klass: ClassLoad, start: float) -> None:
        found = list(endpoints())
        if not found:
            outcomes.append(Outcome(klass.name, start, 0.0, "rejected", "no ready endpoint"))
            return
        url = found[next(turn) % len(found)]
        if url not in clients:
            clients[url] = aiohttpclient.InferenceServerClient(url, conn_limit=1000)
        t0 = time.monotonic()
        try:
            await asyncio.wait_for(
                clients[url].infer(model, _inputs(klass.max_tokens), priority=klass.priority),
                timeout=client_timeout_s,
            )
            outcomes.append(Outcome(klass.name, start, time.monotonic() - t0, "ok"))
        except InferenceServerException as err:
            outcomes.append(
                Outcome(klass.name, start, time.monotonic() - t0, "rejected", err.message())
            )
        except TimeoutError:
            outcomes.append(Outcome(klass.name, start, time.monotonic() - t0, "client-timeout"))

    began = time.monotonic()
    tasks = []
    for at, klass in arrivals:
        delay = began + at - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(klass, at)))
    await asyncio.gather(*tasks)
    for c in clients.values():
        await c.close()
    return outcomes


def run(
    classes: Sequence[ClassLoad],
    *,
    endpoints: Callable[[], Sequence[str]],
    duration_s: float,
    client_timeout_s: float = 10.0,
    model: str = "toy_llm",
    seed: int = 7,
) -> list[Outcome]:
    """Offer `classes` for `duration_s`; return every request's outcome (blocks until the
    last request ended or gave up)."""
    return asyncio.run(
        _run(
            classes,
            endpoints=endpoints,
            duration_s=duration_s,
            client_timeout_s=client_timeout_s,
            model=model,
            seed=seed,
        )
    )


def report(outcomes: Sequence[Outcome], klass: str, *, slo_s: float) -> ClassReport:
    mine = [o for o in outcomes if o.klass == klass]
    ok = sorted(o.seconds for o in mine if o.status == "ok")
    rejected = [o for o in mine if o.status == "rejected"]
    p99 = ok[min(len(ok) - 1, math.ceil(0.99 * len(ok)) - 1)] if ok else math.nan
    return ClassReport(
        name=klass,
        requests=len(mine),
        ok=len(ok),
        rejected=len(rejected),
        client_timeouts=sum(o.status == "client-timeout" for o in mine),
        p99_ok_seconds=p99,
        within_slo=sum(s <= slo_s for s in ok) / max(1, len(mine)),
        max_seconds_to_rejection=max((o.seconds for o in rejected), default=0.0),
        errors=tuple(sorted({o.error for o in rejected})),
    )
