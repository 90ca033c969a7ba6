"""CPU spent reading pods in one scaling pass of 200 ModelDeployments with 2 pods each
(no cluster): every pod read once with `podfacts.read`, start-up medians per
ModelDeployment. With `--before-tree` it runs the same work the way the operator did it
before pods were read once (three readings per pod per pass: the Prometheus batcher's,
the start-up statistics', the observation's), from a checkout of that version:

    mkdir -p /tmp/before && git archive 24ba3b4 | tar -x -C /tmp/before
    .venv/bin/python bench/pod_reading.py
    .venv/bin/python bench/pod_reading.py --before-tree /tmp/before
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
import timeit
from collections.abc import Callable
from typing import Any

MDS = 200
PODS_PER_MD = 2


def body(i: int) -> dict[str, Any]:
    md = f"m{i // PODS_PER_MD:03d}"
    return {
        "metadata": {
            "name": f"{md}-server-5d8f7c9b4-{i:05d}",
            "namespace": "bench",
            "uid": f"uid-{i}",
            "labels": {"modelscale.dev/modeldeployment": md},
            "creationTimestamp": "2027-01-15T08:00:00Z",
            "annotations": {
                "modelscale.dev/seconds-to-ready": "30.0",
                "modelscale.dev/seconds-to-warm": "41.0",
            },
        },
        "status": {
            "podIP": "198.18.0.9",
            "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": "True"},
                {
                    "type": "ContainersReady",
                    "status": "True",
                    "lastTransitionTime": "2027-01-15T08:00:30Z",
                },
                {
                    "type": "modelscale.dev/warmed-up",
                    "status": "True",
                    "reason": "WarmedUp",
                    "message": "warmed up",
                    "lastTransitionTime": "2027-01-15T08:00:41Z",
                },
            ],
            "containerStatuses": [{"name": "triton", "restartCount": 0, "state": {"running": {}}}],
        },
    }


def now_pass(pods: list[dict[str, Any]]) -> Callable[[], None]:
    podfacts = importlib.import_module("modelscale.podfacts")
    startup = importlib.import_module("modelscale.warmup.startup")

    def one() -> None:
        facts = [podfacts.read(p) for p in pods]
        for m in range(MDS):
            mine = facts[PODS_PER_MD * m : PODS_PER_MD * (m + 1)]
            startup.stats_for(md_namespace="bench", md_name=f"m{m:03d}", pods=mine)

    return one


def before_pass(pods: list[dict[str, Any]]) -> Callable[[], None]:
    control_pods = importlib.import_module("modelscale.control.pods")
    plan = importlib.import_module("modelscale.warmup.plan")

    def one() -> None:
        for p in pods:  # the Prometheus batcher: which pods serve
            control_pods.facts(p)
        for m in range(MDS):
            mine = pods[PODS_PER_MD * m : PODS_PER_MD * (m + 1)]
            plan.warmup_stats_for(md_namespace="bench", md_name=f"m{m:03d}", pods=mine)
            [control_pods.facts(p) for p in mine]  # the observation's warmed replicas

    return one


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before-tree", help="a checkout of the version to compare with")
    args = parser.parse_args()
    pods = [body(i) for i in range(MDS * PODS_PER_MD)]
    if args.before_tree:
        sys.path.insert(0, f"{args.before_tree}/operator")
        work, label = before_pass(pods), "before (3 readings per pod)"
    else:
        work, label = now_pass(pods), "now (1 reading per pod)"
    n = 20
    seconds = min(timeit.repeat(work, number=n, repeat=5, timer=time.thread_time)) / n
    print(f"{label}: {seconds * 1000:.1f} ms CPU per pass, {MDS * PODS_PER_MD} pods, {MDS} MDs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
