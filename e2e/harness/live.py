"""One policy's live run on the local cluster (`make bench-live`, and its smoke test):
deploy the toy Triton model the policy's way, hand scaling to the policy's autoscaler,
replay the trace through the Service's ready endpoints while sampling every pod and the
Deployment's `spec.replicas`, then score it (`live_score`) and tear it all down.

The policies' objects are built here (pure functions): KEDA's ScaledObject with its
Prometheus trigger on the model's output token rate, an HPA on the external metric KEDA's
metrics server serves, and a plain Deployment of the same Triton pod without modelscale's
warm-up gate (a KEDA user without modelscale: readiness probe only)."""

from __future__ import annotations

import dataclasses
import functools
import json
import secrets
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from kubernetes import client

from harness import live_score, loadgen, overload, userview
from harness.kubectl import Kubectl, wait_until
from modelscale import podfacts
from modelscale.api import v1alpha1
from modelscale.resources import control, deployment, service

SAMPLE_INTERVAL_S = 1.0
KEDA_METRIC = "s0-prometheus"  # KEDA's name for a ScaledObject's first Prometheus trigger


# --- the policies' objects (pure) -----------------------------------------------------------


def token_rate_query(namespace: str) -> str:
    """The model's output token rate, as a user would write it for KEDA (vLLM's counter)."""
    return f'sum(rate(vllm:generation_tokens_total{{namespace="{namespace}"}}[1m])) or vector(0)'


@dataclasses.dataclass(frozen=True)
class Autoscaling:
    """What every KEDA or HPA policy of a run shares: the per-replica threshold (tokens/s,
    the load-tested capacity), the replica range and where Prometheus is."""

    threshold: float
    min_replicas: int
    max_replicas: int
    prometheus_url: str


def scaled_object(
    name: str, *, namespace: str, target: dict[str, str], scaling: Autoscaling
) -> dict[str, Any]:
    """KEDA's Prometheus trigger on the token rate, everything else at KEDA's defaults
    (30 s polling, the HPA's default behaviour): what KEDA's docs have a user write."""
    trigger = {
        "serverAddress": scaling.prometheus_url,
        "query": token_rate_query(namespace),
        "threshold": f"{scaling.threshold:g}",
    }
    spec: dict[str, Any] = {"scaleTargetRef": target}
    spec["triggers"] = [{"type": "prometheus", "metadata": trigger}]
    spec |= {"minReplicaCount": scaling.min_replicas, "maxReplicaCount": scaling.max_replicas}
    return _object("keda.sh/v1alpha1", "ScaledObject", name, namespace, spec)


def _object(
    api_version: str, kind: str, name: str, namespace: str, spec: dict[str, Any]
) -> dict[str, Any]:
    meta = {"name": name, "namespace": namespace}
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": spec}


def md_target(name: str) -> dict[str, str]:
    return {"apiVersion": "modelscale.dev/v1alpha1", "kind": "ModelDeployment", "name": name}


def hpa_on_keda_metric(
    name: str, *, namespace: str, target: dict[str, str], source: str, scaling: Autoscaling
) -> dict[str, Any]:
    """A plain HPA (default behaviour) on the external metric KEDA's metrics server serves
    for the ScaledObject `source`, averaged over the target's replicas."""
    metric = {
        "name": KEDA_METRIC,
        "selector": {"matchLabels": {"scaledobject.keda.sh/name": source}},
    }
    average = {"type": "AverageValue", "averageValue": f"{scaling.threshold:g}"}
    spec: dict[str, Any] = {
        "scaleTargetRef": target,
        "metrics": [{"type": "External", "external": {"metric": metric, "target": average}}],
    }
    spec |= {"minReplicas": scaling.min_replicas, "maxReplicas": scaling.max_replicas}
    return _object("autoscaling/v2", "HorizontalPodAutoscaler", name, namespace, spec)


def plain_objects(md_body: dict[str, Any], *, name: str, key: str) -> list[dict[str, Any]]:
    """The ModelDeployment's own Triton pod as a plain Deployment + Service + control-key
    Secret, built by the operator's builders, with the warm-up readiness gate, the owner
    reference and the operator's labels removed: Ready as soon as Triton's readiness probe
    passes, and nothing the operator would recognise as its own."""
    md = v1alpha1.ModelDeployment.model_validate(md_body)
    namespace = md_body["metadata"]["namespace"]
    labels = {"app": name}
    meta = {"name": name, "namespace": namespace, "labels": labels}
    dep = deployment.build(md, replicas=1)
    dep["metadata"] = meta
    dep["spec"]["selector"] = {"matchLabels": labels}
    template = dep["spec"]["template"]
    template["metadata"]["labels"] = labels
    del template["spec"]["readinessGates"]
    svc = service.build(md)
    svc["metadata"] = meta
    svc["spec"]["selector"] = labels
    secret = control.build_secret(md, key=key)
    secret["metadata"] = {**meta, "name": control.secret_name(md)}
    return [secret, dep, svc]


def sleeper_deployment(name: str, *, namespace: str) -> dict[str, Any]:
    """One idle pod: a scale target for a ScaledObject whose only job is to have KEDA's
    metrics server serve its metric to a separate HPA."""
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]},
            },
        },
    }


# --- what happened, sampled ------------------------------------------------------------------


class Sampler:
    """Every SAMPLE_INTERVAL_S: the pods matching `selector` (last seen, newest body) and
    the Deployment's `spec.replicas`. Runs on the endpoint poller's thread, which keeps
    going (and logs) through apiserver hiccups. A context manager."""

    def __init__(self, api: Any, *, namespace: str, selector: str, deployment_name: str) -> None:
        self.core, self.apps = client.CoreV1Api(api), client.AppsV1Api(api)
        self.api, self.ns, self.selector, self.deployment = (
            api,
            namespace,
            selector,
            deployment_name,
        )
        self.bodies: dict[str, dict[str, Any]] = {}
        self.last_seen: dict[str, float] = {}
        self.present: set[str] = set()
        self.replicas: list[tuple[float, int]] = []
        self._poller = loadgen.EndpointPoller(self.once, interval_s=SAMPLE_INTERVAL_S)

    def once(self) -> list[str]:
        now = time.time()
        dep = self.apps.read_namespaced_deployment(self.deployment, self.ns)
        self.replicas.append((now, int(dep.spec.replicas or 0)))
        pods = self.core.list_namespaced_pod(self.ns, label_selector=self.selector).items
        self.present = set()
        for pod in pods:
            body = self.api.sanitize_for_serialization(pod)
            uid = body["metadata"]["uid"]
            self.bodies[uid], self.last_seen[uid] = body, now
            self.present.add(uid)
        return []

    def __enter__(self) -> Sampler:
        self._poller.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._poller.stop()

    def lives(self, *, gated: bool, warmed_before: float) -> list[live_score.PodLife]:
        """Every pod seen. Gated: warm from the operator's warm-up; not gated: pods that
        existed before `warmed_before` were warmed by the harness, later ones by nobody."""
        out = []
        for uid, body in self.bodies.items():
            facts = podfacts.read(body)
            created = facts.created if facts.created is not None else self.last_seen[uid]
            ready = next(
                (
                    podfacts.time_or_none(c.get("lastTransitionTime"))
                    for c in (body.get("status") or {}).get("conditions") or []
                    if c.get("type") == "Ready" and c.get("status") == "True"
                ),
                None,
            )
            if gated:
                warm_from = userview.warm_time(body)
            else:
                warm_from = warmed_before if created < warmed_before else None
            out.append(
                live_score.PodLife(
                    name=facts.name,
                    ip=facts.ip,
                    created=created,
                    ready_at=ready,
                    warm_from=warm_from,
                    gone_at=None if uid in self.present else self.last_seen[uid],
                )
            )
        return out


# --- one run ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Setup:
    """How a policy's pods are reached and watched once its objects are applied."""

    service: str
    selector: str  # label selector of its pods
    deployment: str  # the Deployment whose spec.replicas the pods follow
    gated: bool  # modelscale's warm-up gate in front of every pod
    initial_ready: int  # Ready pods to wait for before the load starts


def md_setup(name: str, *, initial_ready: int = 1) -> Setup:
    return Setup(
        service=name,
        selector=f"{podfacts.MD_LABEL}={name}",
        deployment=name,
        gated=True,
        initial_ready=initial_ready,
    )


def plain_setup(name: str) -> Setup:
    return Setup(
        service=name, selector=f"app={name}", deployment=name, gated=False, initial_ready=1
    )


def ready_endpoints(api: Any, namespace: str, service_name: str) -> loadgen.EndpointPoller:
    return loadgen.EndpointPoller(
        lambda: loadgen.ready_endpoints_from_slices(api, namespace, service_name), interval_s=0.3
    )


def apply_all(kubectl: Kubectl, objects: Sequence[dict[str, Any]]) -> None:
    for obj in objects:
        kubectl.run("apply", "--server-side", "-f", "-", stdin=json.dumps(obj))


def wait_ready(api: Any, namespace: str, setup: Setup, *, timeout: float) -> list[str]:
    def found() -> list[str]:
        eps = loadgen.ready_endpoints_from_slices(api, namespace, setup.service)
        return eps if len(eps) >= setup.initial_ready else []

    result: list[str] = wait_until(
        found, timeout=timeout, what=f"{setup.initial_ready} ready endpoint(s) of {setup.service}"
    )
    return result


def warm_by_hand(endpoints: Sequence[str], *, count: int) -> None:
    """What a Deployment that has been serving for a while has had: `count` requests on
    each pod, so its engine is past its cold first requests."""
    for ep in endpoints:
        reqs = [loadgen.TraceRequest(t_s=0.0, input_tokens=8, output_tokens=4)] * count
        result = loadgen.replay(reqs, endpoints=functools.partial(list, [ep]), max_concurrency=1)
        if result.summary().ok != count:
            raise AssertionError(f"warming {ep} by hand: {result.summary()}")


@dataclasses.dataclass(frozen=True)
class Plan:
    """A policy's objects, applied before the load (`objects`) and once its first pods are
    Ready (`autoscaler`: the ScaledObject or HPA), and how its pods are reached."""

    setup: Setup
    objects: Sequence[dict[str, Any]]
    autoscaler: Sequence[dict[str, Any]] = ()


@dataclasses.dataclass(frozen=True)
class Load:
    requests: Sequence[loadgen.TraceRequest]
    scoring: live_score.Scoring
    replay: loadgen.ReplayOptions


class Cluster(NamedTuple):
    kubectl: Kubectl
    api: Any  # kubernetes.client.ApiClient


@dataclasses.dataclass(frozen=True)
class Run:
    report: live_score.LiveReport
    result: loadgen.ReplayResult
    replicas: list[tuple[float, int]]
    pods: list[live_score.PodLife]


def run(policy: str, *, cluster: Cluster, namespace: str, plan: Plan, load: Load) -> Run:
    """Apply the plan's objects, wait for the first pods (warm an ungated one by hand, as
    its own traffic would have), apply its autoscaler, replay the load and score it."""
    kubectl, api, setup = cluster.kubectl, cluster.api, plan.setup
    apply_all(kubectl, plan.objects)
    first = wait_ready(api, namespace, setup, timeout=300)
    if not setup.gated:
        warm_by_hand(first, count=load.scoring.cold_per_pod)
    apply_all(kubectl, plan.autoscaler)
    warmed_before = time.time()
    sampler = Sampler(
        api, namespace=namespace, selector=setup.selector, deployment_name=setup.deployment
    )
    with sampler, ready_endpoints(api, namespace, setup.service) as endpoints:
        result = loadgen.replay(load.requests, endpoints=endpoints, **load.replay)
        sampler.once()
    pods = sampler.lives(gated=setup.gated, warmed_before=warmed_before)
    report = live_score.score(
        policy=policy, result=result, pods=pods, replicas=sampler.replicas, scoring=load.scoring
    )
    return Run(report=report, result=result, replicas=sampler.replicas, pods=pods)


def new_namespace(kubectl: Kubectl, api: Any, name: str) -> str:
    kubectl.run("create", "namespace", name)
    core = client.CoreV1Api(api)
    wait_until(
        lambda: core.read_namespaced_service_account("default", name),
        timeout=30,
        what=f"ServiceAccount default in namespace {name}",
    )
    return name


def delete_namespace(kubectl: Kubectl, api: Any, name: str, *, timeout: float = 120) -> None:
    """Autoscalers first (so nothing scales while the rest goes), then everything; waits
    until its pods are gone so the next run has the CPU to itself."""
    for kind in ("scaledobjects.keda.sh", "hpa"):
        kubectl.run("-n", name, "delete", kind, "--all", "--wait=true", check=False)
    kubectl.run("delete", "namespace", name, "--wait=false", check=False)
    core = client.CoreV1Api(api)
    wait_until(
        lambda: not core.list_namespaced_pod(name).items,
        timeout=timeout,
        what=f"the pods of namespace {name} gone",
    )


def replica_capacity(
    endpoints: Callable[[], Sequence[str]],
    *,
    rates_per_s: Sequence[float],
    max_tokens: int,
    slo_p99_s: float,
    duration_s: float,
) -> tuple[float, list[overload.ClassReport]]:
    """The load test a KEDA user runs to set the threshold: Poisson requests of
    `max_tokens` at each rate in turn against one warm replica; the capacity is the output
    token rate of the highest rate whose requests (all of them) met the SLO at P99."""
    capacity, reports = 0.0, []
    for rate in rates_per_s:
        klass = overload.ClassLoad(
            name=f"{rate:g}/s", rate_per_s=rate, priority=0, max_tokens=max_tokens
        )
        outcomes = overload.run(
            [klass], endpoints=endpoints, duration_s=duration_s, client_timeout_s=4 * slo_p99_s
        )
        rep = overload.report(outcomes, klass.name, slo_s=slo_p99_s)
        reports.append(rep)
        print(f"load test {rep.line()}")
        if rep.within_slo < 0.99:
            break
        capacity = rate * max_tokens
    return capacity, reports


def new_key() -> str:
    return secrets.token_hex(control.KEY_BYTES)
