"""Cost of one scaling pass for 1 and for N ModelDeployments, on the real local cluster
and its real Prometheus: Prometheus queries per pass (must not grow with N), Kubernetes
API calls, and CPU time per ModelDeployment.

    make cluster-up
    KUBECONFIG=.cluster/kubeconfig MODELSCALE_PROMETHEUS_URL=http://198.18.255.1:19090 \
        .venv/bin/python bench/autoscaler_loop.py --count 200

(the local cluster's kubeconfig and Prometheus; any cluster works with its own).

The ModelDeployments have minReplicas 0 (RecommendOnly mode: Predictive refuses 0) and their
Deployments 0 replicas, so no Triton process starts; the pass still lists everything,
queries Prometheus and runs the policy for each (which holds: no traffic means no metrics)."""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import sys
import time
import uuid

import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from modelscale import telemetry
from modelscale.api.v1alpha1 import ModelDeployment
from modelscale.config import OperatorConfig
from modelscale.kube import apply as kube_apply
from modelscale.loops import scaling
from modelscale.resources import deployment

CRD = pathlib.Path(__file__).resolve().parents[1] / "crds" / "modeldeployments.modelscale.dev.yaml"


def counter(metric: object) -> float:
    return float(metric._value.get())  # type: ignore[attr-defined]


def make(api: client.ApiClient, ns: str, n: int) -> None:
    objects = client.CustomObjectsApi(api)
    for i in range(n):
        body = {
            "apiVersion": "modelscale.dev/v1alpha1",
            "kind": "ModelDeployment",
            "metadata": {"name": f"m{i:03d}", "namespace": ns},
            "spec": {
                "model": {"name": "toy_llm", "repository": "/models"},
                "minReplicas": 0,
                "maxReplicas": 2,
                "scaling": {"mode": "RecommendOnly"},
            },
        }
        created = objects.create_namespaced_custom_object(
            "modelscale.dev", "v1alpha1", ns, "modeldeployments", body
        )
        md = ModelDeployment.model_validate(created)
        kube_apply.apply(api, deployment.build(md, replicas=0))


def install_crd(api: client.ApiClient) -> None:
    crd = yaml.safe_load(CRD.read_text())
    ext = client.ApiextensionsV1Api(api)
    try:
        ext.create_custom_resource_definition(crd)
    except ApiException as err:
        if err.status != 409:
            raise
    for _ in range(100):
        status = ext.read_custom_resource_definition(crd["metadata"]["name"]).status
        if any(c.type == "Established" and c.status == "True" for c in status.conditions or []):
            return
        time.sleep(0.1)


def measure(
    api: client.ApiClient, ns: str, *, prometheus_url: str, passes: int
) -> tuple[float, float, float]:
    config = OperatorConfig(prometheus_url=prometheus_url, namespaces=(ns,))
    queries, cpu, wall = [], [], []
    for _ in range(passes):
        q0, c0, w0 = counter(telemetry.QUERIES), time.thread_time(), time.perf_counter()
        scaling.run_pass(api, config=config, now=time.time())
        queries.append(counter(telemetry.QUERIES) - q0)
        cpu.append(time.thread_time() - c0)
        wall.append(time.perf_counter() - w0)
    return statistics.median(queries), statistics.median(cpu), statistics.median(wall)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument(
        "--kubeconfig", default=os.environ.get("KUBECONFIG"), help="default: $KUBECONFIG"
    )
    parser.add_argument(
        "--prometheus-url",
        default=os.environ.get("MODELSCALE_PROMETHEUS_URL"),
        help="the Prometheus that scrapes the cluster; default: $MODELSCALE_PROMETHEUS_URL",
    )
    args = parser.parse_args()
    if not args.kubeconfig or not args.prometheus_url:
        parser.error(
            "give --kubeconfig and --prometheus-url (or set KUBECONFIG and "
            "MODELSCALE_PROMETHEUS_URL), e.g. the local cluster's, see the docstring"
        )
    config.load_kube_config(args.kubeconfig)
    api = client.ApiClient()
    core = client.CoreV1Api(api)
    install_crd(api)
    rows = []
    for n in (1, args.count):
        ns = f"bench-loop-{uuid.uuid4().hex[:6]}"
        core.create_namespace({"metadata": {"name": ns}})
        try:
            make(api, ns, n)
            q, cpu, wall = measure(api, ns, prometheus_url=args.prometheus_url, passes=args.passes)
            rows.append((n, q, cpu, wall))
        finally:
            core.delete_namespace(ns)
    print(
        f"{'MDs':>5} {'queries/pass':>13} {'CPU s/pass':>11} {'CPU ms/MD':>10} {'wall s/pass':>12}"
    )
    for n, q, cpu, wall in rows:
        print(f"{n:>5} {q:>13.0f} {cpu:>11.3f} {1000 * cpu / n:>10.2f} {wall:>12.3f}")
    base, big = rows[0], rows[-1]
    print(
        f"ratio {big[0]}/{base[0]} MDs: queries x{big[1] / max(base[1], 1):.2f}, "
        f"CPU per MD x{(big[2] / big[0]) / max(base[2] / base[0], 1e-9):.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
