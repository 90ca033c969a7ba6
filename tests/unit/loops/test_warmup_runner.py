"""The warm-up runner's bookkeeping, without a cluster: which pods it warms, how many at
once, what a deletion or `stop()` cancels, when a warmed gate closes again and that a pod
is replaced only once. The Kubernetes calls are a recording fake (`PodCalls`' methods)
and the warm-up itself a fake `run_warmup`: what is under test is the runner, not them
(tests/integration and e2e/tests run the real ones)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from modelscale import podfacts
from modelscale.api.v1alpha1 import ModelDeployment
from modelscale.loops import podcalls
from modelscale.loops import warmup as runner_mod
from modelscale.podfacts import PodFacts
from modelscale.warmup import client as warmup_client
from modelscale.warmup import reasons, verdict

NOW = 1_800_000_000.0
MD_BODY: dict[str, Any] = {
    "apiVersion": "modelscale.dev/v1alpha1",
    "kind": "ModelDeployment",
    "metadata": {"name": "llama", "namespace": "llm", "uid": "md-uid"},
    "spec": {"model": {"name": "toy_llm", "repository": "/models"}},
}


def pod_body(
    uid: str,
    *,
    containers_ready: bool = True,
    warmed: bool | None = None,
    restarts: int = 0,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    conds: list[dict[str, Any]] = [
        {"type": "ContainersReady", "status": str(containers_ready)},
    ]
    if warmed is not None:
        conds.append(
            {"type": podfacts.CONDITION_TYPE, "status": str(warmed), "reason": "r", "message": "m"}
        )
    return {
        "metadata": {
            "name": f"pod-{uid}",
            "namespace": "llm",
            "uid": uid,
            "labels": {podfacts.MD_LABEL: "llama"},
            "annotations": dict(annotations or {}),
            "creationTimestamp": "2027-01-15T08:00:00Z",
        },
        "status": {
            "podIP": "198.18.0.10",
            "conditions": conds,
            "containerStatuses": [{"name": "triton", "restartCount": restarts}],
        },
    }


@dataclass
class FakeCalls:
    """What the runner asked Kubernetes to do, in order."""

    conditions: list[tuple[str, bool, str, float]] = field(default_factory=list)
    annotations: list[tuple[str, dict[str, str | None]]] = field(default_factory=list)
    events: list[tuple[str, str]] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)

    async def call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return None  # load sampling: no count

    async def fresh(self, facts: PodFacts) -> PodFacts:
        return facts

    async def annotate(self, facts: PodFacts, updates: Mapping[str, str | None]) -> None:
        self.annotations.append((facts.uid, dict(updates)))

    async def event(
        self, involved: dict[str, Any], *, warning: bool, reason: str, message: str, now: float
    ) -> None:
        self.events.append((involved["kind"], reason))

    async def write_condition(
        self, facts: PodFacts, *, ok: bool, reason: str, now: float, **kw: Any
    ) -> PodFacts:
        self.conditions.append((facts.uid, ok, reason, now))
        annotations = kw.get("annotations")
        if annotations:  # in the same write as the gate
            self.annotations.append((facts.uid, dict(annotations)))
        return facts

    async def spec(self, facts: PodFacts) -> podcalls.Spec | None:
        return podcalls.Spec(body=MD_BODY, md=ModelDeployment.model_validate(MD_BODY))

    async def delete(self, facts: PodFacts) -> None:
        self.deleted.append(facts.uid)


class FakeWarmup:
    """`run_warmup` that blocks until released (or stopped), counting how many run at once."""

    def __init__(self, *, ok: bool = True) -> None:
        self.ok = ok
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.running = 0
        self.most = 0
        self.started: list[str] = []

    def __call__(
        self,
        *,
        target: warmup_client.Target,
        settings: Any,
        stop: threading.Event,
        serving: Any = None,
        load_timeout_seconds: float = 0.0,
    ) -> verdict.WarmupResult:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
            self.started.append(target.host)
        try:
            while not self.release.wait(0.01):
                if stop.is_set():
                    raise warmup_client.StoppedError()
            reason = reasons.WARMED_UP if self.ok else reasons.MODEL_NOT_READY
            return verdict.WarmupResult(ok=self.ok, reason=reason, message="fake")
        finally:
            with self.lock:
                self.running -= 1


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> FakeCalls:
    fake = FakeCalls()
    monkeypatch.setattr(podcalls, "PodCalls", lambda api: fake)
    return fake


@pytest.fixture
def warmup(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeWarmup]:
    fake = FakeWarmup()
    monkeypatch.setattr(warmup_client, "run_warmup", fake)
    yield fake
    fake.release.set()  # never leave a pool thread blocked


def new_runner() -> runner_mod.WarmupRunner:
    return runner_mod.WarmupRunner(api=None, clock=lambda: NOW)  # type: ignore[arg-type]


async def until(check: Any, what: str, timeout_s: float = 10.0) -> None:
    for _ in range(int(timeout_s / 0.01)):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_ready_pod_is_warmed_once_and_its_gate_opened(
    calls: FakeCalls, warmup: FakeWarmup
) -> None:
    async def scenario() -> None:
        r = new_runner()
        body = pod_body("a")
        r.on_pod_event(event_type="ADDED", body=body)
        r.on_pod_event(event_type="MODIFIED", body=body)  # a second event: no second warm-up
        assert list(r.in_flight) == ["a"]
        await until(lambda: warmup.started, "the warm-up to start")
        warmup.release.set()
        await until(lambda: not r.in_flight, "the warm-up to finish")
        r.stop()

    asyncio.run(scenario())
    assert warmup.started == ["198.18.0.10"]
    # Closed (in progress, at the injected clock) before the warm-up, open after it.
    assert [(c[1], c[2], c[3]) for c in calls.conditions] == [
        (False, reasons.IN_PROGRESS, NOW),
        (True, reasons.WARMED_UP, NOW),
    ]
    assert any(podfacts.ANNOTATION_SECONDS_TO_WARM in u for _, u in calls.annotations)


def test_at_most_max_concurrent_warmups_run_and_the_rest_wait_for_a_slot(
    calls: FakeCalls, warmup: FakeWarmup
) -> None:
    limit = runner_mod.MAX_CONCURRENT_WARMUPS
    n = limit + 4

    async def scenario() -> None:
        r = new_runner()
        for i in range(n):
            r.on_pod_event(event_type="ADDED", body=pod_body(f"p{i}"))
        assert len(r.in_flight) == n  # every pod is tracked ...
        await until(lambda: warmup.running == limit, f"{limit} warm-ups running")
        await asyncio.sleep(0.2)
        assert warmup.running == limit  # ... but only `limit` run
        warmup.release.set()
        await until(lambda: not r.in_flight, "every warm-up to finish")
        r.stop()

    asyncio.run(scenario())
    assert warmup.most == limit
    assert len(warmup.started) == n
    assert sum(1 for c in calls.conditions if c[1]) == n  # every gate opened


def test_deleting_a_pod_or_stopping_the_runner_cancels_its_warm_up(
    calls: FakeCalls, warmup: FakeWarmup
) -> None:
    async def scenario() -> None:
        r = new_runner()
        r.on_pod_event(event_type="ADDED", body=pod_body("a"))
        r.on_pod_event(event_type="ADDED", body=pod_body("b"))
        await until(lambda: warmup.running == 2, "both warm-ups running")
        stop_a = r.in_flight["a"].stop
        r.on_pod_event(event_type="DELETED", body=pod_body("a"))
        assert list(r.in_flight) == ["b"] and stop_a.is_set()
        stop_b = r.in_flight["b"].stop
        r.stop()
        assert r.in_flight == {} and stop_b.is_set()
        await until(lambda: warmup.running == 0, "the warm-up threads to stop")

    asyncio.run(scenario())
    assert not any(ok for _, ok, _, _ in calls.conditions)  # no gate opened


def test_a_restarted_container_closes_the_gate_once_and_is_warmed_again(
    calls: FakeCalls, warmup: FakeWarmup
) -> None:
    warmed = {podfacts.ANNOTATION_WARMED_RESTARTS: "0"}

    async def scenario() -> None:
        r = new_runner()
        r.on_pod_event(event_type="MODIFIED", body=pod_body("a", warmed=True, annotations=warmed))
        await asyncio.sleep(0.05)
        assert calls.conditions == [] and r.in_flight == {}  # warmed and not restarted
        restarted = pod_body("a", warmed=True, restarts=1, annotations=warmed)
        r.on_pod_event(event_type="MODIFIED", body=restarted)
        await until(lambda: calls.conditions, "the gate closed")
        assert r.in_flight == {}  # closing is not warming: the next event warms
        # The closed gate comes back as the next event: now the pod is warmed anew.
        r.on_pod_event(event_type="MODIFIED", body=pod_body("a", warmed=False, restarts=1))
        assert list(r.in_flight) == ["a"]
        warmup.release.set()
        await until(lambda: not r.in_flight, "the re-warm to finish")
        r.stop()

    asyncio.run(scenario())
    assert [(ok, reason) for _, ok, reason, _ in calls.conditions] == [
        (False, reasons.RESTARTED),
        (False, reasons.IN_PROGRESS),
        (True, reasons.WARMED_UP),
    ]
    assert ("a", {podfacts.ANNOTATION_WARMED_RESTARTS: None}) in calls.annotations


def test_a_pod_out_of_attempts_is_replaced_once_however_many_events_follow(
    calls: FakeCalls, warmup: FakeWarmup
) -> None:
    spent = {podfacts.ANNOTATION_ATTEMPTS: "3"}  # the default maxAttempts

    async def scenario() -> None:
        r = new_runner()
        for _ in range(3):
            r.on_pod_event(event_type="MODIFIED", body=pod_body("a", annotations=spent))
            await until(lambda: not r.in_flight, "the runner to give up")
        r.stop()

    asyncio.run(scenario())
    assert warmup.started == []  # no attempt beyond maxAttempts
    assert calls.deleted == ["a"]
    assert calls.events.count(("Pod", reasons.GAVE_UP)) == 1
    assert calls.events.count(("ModelDeployment", reasons.GAVE_UP)) == 1


def test_a_pod_not_ready_or_without_an_ip_is_not_warmed(
    calls: FakeCalls, warmup: FakeWarmup
) -> None:
    not_ready = pod_body("a", containers_ready=False)
    no_ip = pod_body("b")
    no_ip["status"].pop("podIP")

    async def scenario() -> None:
        r = new_runner()
        r.on_pod_event(event_type="ADDED", body=not_ready)
        r.on_pod_event(event_type="ADDED", body=no_ip)
        assert r.in_flight == {}
        r.stop()

    asyncio.run(scenario())
    assert warmup.started == [] and calls.conditions == []
