"""Leader election, fencing and the one-write gate, against the real kube-apiserver of the
local cluster (no operator process: two `Leadership` candidates in this test process,
each with its own client, as two replicas would be).

A partition is made for real: the leader's client is pointed at a port nobody listens on,
so its renewals fail with connection errors, as from a node cut off from the apiserver."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, config

from modelscale import leader, podfacts
from modelscale.api.v1alpha1 import Condition
from modelscale.kube import lease, pods
from modelscale.warmup import gate

pytestmark = pytest.mark.cluster

# Short durations keep the test quick; the ratios are the chart's defaults (8/6/2).
FAST = {"lease_duration": 3, "renew_deadline": 2.0, "retry_period": 1.0}


def new_api(cluster: Any) -> client.ApiClient:
    return config.new_client_from_config(config_file=str(cluster.kubeconfig))  # type: ignore[no-any-return,no-untyped-call]


@pytest.fixture
def two_candidates(
    cluster: Any, namespace: str
) -> Iterator[tuple[leader.Leadership, leader.Leadership, list[client.ApiClient]]]:
    apis = [new_api(cluster), new_api(cluster)]
    name = f"lease-{uuid.uuid4().hex[:6]}"
    candidates = tuple(
        leader.Leadership.elect(
            api=api,
            settings=leader.ElectionSettings(
                lease_name=name, namespace=namespace, identity=f"replica-{i}", **FAST
            ),
        )
        for i, api in enumerate(apis)
    )
    yield candidates[0], candidates[1], apis
    for api in apis:
        api.close()


async def _sample(
    a: leader.Leadership, b: leader.Leadership, *, until: Any, timeout: float
) -> list[tuple[float, bool, bool]]:
    """(time, a holds, b holds) every 20 ms until `until(a, b)`; `until=None`: for
    `timeout` seconds."""
    seen: list[tuple[float, bool, bool]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen.append((time.monotonic(), a.holds(), b.holds()))
        if until is not None and until(a, b):
            return seen
        await asyncio.sleep(0.02)
    if until is None:
        return seen
    raise AssertionError(f"timed out; last samples {seen[-3:]}")


def test_partitioned_leader_stops_before_the_other_takes_over(
    two_candidates: tuple[leader.Leadership, leader.Leadership, list[client.ApiClient]],
) -> None:
    a, b, apis = two_candidates

    async def scenario() -> tuple[float, float, float, list[tuple[float, bool, bool]]]:
        a.start()
        b.start()
        seen = await _sample(a, b, until=lambda x, y: x.holds() or y.holds(), timeout=20)
        # The follower watches a few renewals go by.
        seen += await _sample(a, b, until=None, timeout=3 * FAST["retry_period"])
        first, second = (a, b) if a.holds() else (b, a)
        first_api = apis[0] if first is a else apis[1]
        # Partition the leader: nothing listens on port 1.
        first_api.configuration.host = "https://127.0.0.1:1"
        cut = time.monotonic()
        renewed = first._lock.renewed_at if first._lock else None
        print(f"\nlast renewal {cut - (renewed or cut):.2f} s before the cut")
        seen += await _sample(a, b, until=lambda x, y: second.holds(), timeout=30)
        stopped = next(t for t, ha, hb in seen if t >= cut and not (ha if first is a else hb))
        took_over = seen[-1][0]
        a.stop()
        b.stop()
        return cut, stopped, took_over, seen

    cut, stopped, took_over, seen = asyncio.run(scenario())
    print(
        f"\npartition: old leader fenced after {stopped - cut:.2f} s, "
        f"new leader after {took_over - cut:.2f} s (lease {FAST['lease_duration']} s, "
        f"renew deadline {FAST['renew_deadline']} s)"
    )
    # Never two replicas allowed to write at the same instant.
    assert not [s for s in seen if s[1] and s[2]], "both held a valid lease"
    # The old leader fenced itself within its renew deadline of the cut ...
    assert stopped - cut <= FAST["renew_deadline"] + 0.2
    # ... and the other took over only after a whole lease duration without renewals
    # (the last renewal came at most one retry period before the cut).
    assert took_over - cut >= FAST["lease_duration"] - FAST["retry_period"] - 0.2
    assert took_over > stopped


def test_a_follower_cannot_write_and_the_leader_can(
    cluster: Any, namespace: str, kube_api: Any
) -> None:
    config.load_kube_config(config_file=str(cluster.kubeconfig))  # type: ignore[no-untyped-call]
    holds = {"value": False}
    fenced = lease.fence_writes(client.ApiClient(), fence=lambda: holds["value"])
    core = client.CoreV1Api(fenced)
    body = {"metadata": {"name": "fenced"}, "data": {"who": "nobody"}}
    with pytest.raises(lease.NotLeaderError, match="does not hold the leader lease"):
        core.create_namespaced_config_map(namespace, body)
    # Reads still pass: a follower keeps watching.
    assert core.list_namespaced_config_map(namespace).items is not None
    plain = client.CoreV1Api(kube_api)
    assert [c.metadata.name for c in plain.list_namespaced_config_map(namespace).items].count(
        "fenced"
    ) == 0
    holds["value"] = True
    core.create_namespaced_config_map(namespace, body)
    assert plain.read_namespaced_config_map("fenced", namespace).data == {"who": "nobody"}
    fenced.close()


def test_gate_and_its_bookkeeping_are_one_pods_status_write(kube_api: Any, namespace: str) -> None:
    """The pods/status strategy keeps annotation changes: the condition that opens the
    gate and the restart count that re-closes it land in one resourceVersion."""
    core = client.CoreV1Api(kube_api)
    pod = core.create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": "gated"},
            "spec": {
                "nodeName": "no-such-node",  # never run: only its API object matters here
                "readinessGates": [{"conditionType": podfacts.CONDITION_TYPE}],
                "containers": [{"name": "c", "image": "busybox"}],
            },
        },
    )

    def write(status: str, reason: str, restarts: str | None) -> Any:
        """One pods/status patch; the pod as read right after it."""
        cond = Condition(type=podfacts.CONDITION_TYPE, status=status, reason=reason, message="m")
        change = gate.GateChange(cond, {podfacts.ANNOTATION_WARMED_RESTARTS: restarts})
        pods.patch_condition(
            kube_api, namespace=namespace, name="gated", uid=pod.metadata.uid, change=change
        )
        after = core.read_namespaced_pod("gated", namespace)
        mine = [c for c in after.status.conditions or [] if c.type == podfacts.CONDITION_TYPE]
        return after, [(c.status, c.reason) for c in mine]

    after, opened = write("True", "WarmedUp", "0")
    assert int(after.metadata.resource_version) > int(pod.metadata.resource_version)
    assert opened == [("True", "WarmedUp")]
    assert after.metadata.annotations[podfacts.ANNOTATION_WARMED_RESTARTS] == "0"
    # Closing it again removes the annotation in the same write (None deletes a key).
    again, closed = write("False", "Restarted", None)
    assert podfacts.ANNOTATION_WARMED_RESTARTS not in (again.metadata.annotations or {})
    assert closed == [("False", "Restarted")]


def test_a_stopping_leader_hands_the_lease_over_at_once(
    two_candidates: tuple[leader.Leadership, leader.Leadership, list[client.ApiClient]],
) -> None:
    """A rolling update of the operator: the old leader's clean shutdown releases the
    Lease, so the other leads within about one retry period, not a lease duration."""
    a, b, _ = two_candidates

    async def scenario() -> float:
        a.start()
        b.start()
        await _sample(a, b, until=lambda x, y: x.holds() or y.holds(), timeout=20)
        await _sample(a, b, until=None, timeout=2 * FAST["retry_period"])
        first, second = (a, b) if a.holds() else (b, a)
        stopped = time.monotonic()
        await asyncio.to_thread(first.stop)
        assert not first.holds()
        await _sample(a, b, until=lambda x, y: second.holds(), timeout=10)
        second.stop()
        return time.monotonic() - stopped

    took = asyncio.run(scenario())
    print(f"\nreleased lease taken over after {took:.2f} s")
    assert took <= FAST["retry_period"] + 0.5
