"""The watch cache as the loops read it: nothing until kopf has listed everything once,
then snapshots that later index changes do not alter."""

from __future__ import annotations

from typing import Any

from modelscale import podfacts
from modelscale.kube.apply import Running
from modelscale.kube.cache import Cache


def _pod(name: str, md: str) -> podfacts.PodFacts:
    body: dict[str, Any] = {
        "metadata": {
            "namespace": "ns",
            "name": name,
            "uid": name,
            "labels": {podfacts.MD_LABEL: md},
        },
        "status": {},
    }
    return podfacts.read(body)


def test_unsynced_cache_reads_as_none() -> None:
    cache = Cache()
    assert cache.pods() is None and cache.modeldeployments() is None
    cache.attach(pods={}, modeldeployments={}, running={})
    assert cache.pods() is None  # attached but kopf has not listed everything yet
    cache.synced.set()
    assert cache.pods() == {} and cache.modeldeployments() == [] and cache.running() == {}


def test_snapshots_are_copies_and_skip_empty_keys() -> None:
    pods = {("ns", "a"): [_pod("a-1", "a"), _pod("a-2", "a")], ("ns", "b"): []}
    mds = {("ns", "a"): [{"metadata": {"name": "a"}}]}
    running = {("ns", "a"): [Running(replicas=2, resource_version="7")]}
    cache = Cache()
    cache.attach(pods=pods, modeldeployments=mds, running=running)
    cache.synced.set()
    snap = cache.pods()
    assert snap is not None and list(snap) == [("ns", "a")]
    pods[("ns", "a")].pop()
    assert [p.name for p in snap[("ns", "a")]] == ["a-1", "a-2"]
    assert cache.pods_of(("ns", "a")) == [pods[("ns", "a")][0]]
    assert cache.pods_of(("ns", "zzz")) == []
    assert cache.running() == {("ns", "a"): Running(replicas=2, resource_version="7")}
    assert cache.modeldeployments() == [{"metadata": {"name": "a"}}]


def test_one_modeldeployment_by_key() -> None:
    cache = Cache()
    cache.attach(pods={}, modeldeployments={("ns", "a"): [{"v": 1}]}, running={})
    assert cache.modeldeployment(("ns", "a")) is None  # not synced
    cache.synced.set()
    assert cache.modeldeployment(("ns", "a")) == {"v": 1}
    assert cache.modeldeployment(("ns", "b")) is None
