"""`modelscale run`: configure and start the kopf operator.

Everything kopf persists goes into the ModelDeployment's status, never its metadata,
so a GitOps tool comparing what the user committed sees no drift caused by us."""

from __future__ import annotations

import argparse
import hashlib
import logging
import math
import os
from collections.abc import Callable, Iterable

import kopf
import prometheus_client
from kubernetes import client

from modelscale import leader, telemetry
from modelscale.config import DEFAULT_PROMETHEUS_URL, OperatorConfig
from modelscale.kube import client as kube_client
from modelscale.kube import lease
from modelscale.loops.warmup import WarmupRunner
from modelscale.metrics import connection


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="modelscale run", description=__doc__)
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument("--all-namespaces", action="store_true", help="watch every namespace")
    scope.add_argument(
        "--namespace", action="append", default=[], help="watch this namespace (repeatable)"
    )
    parser.add_argument("--metrics-port", type=int, default=8080, help="operator metrics port")
    parser.add_argument("--health-port", type=int, default=8081, help="liveness endpoint port")
    parser.add_argument(
        "--prometheus-url",
        default=os.environ.get("MODELSCALE_PROMETHEUS_URL", DEFAULT_PROMETHEUS_URL),
        help="Prometheus that scrapes the Triton pods (a ModelDeployment may override it)",
    )
    parser.add_argument(
        "--autoscale-interval", type=float, default=15.0, help="seconds between scaling passes"
    )
    parser.add_argument(
        "--resync-interval", type=float, default=60.0, help="seconds between full reconciles"
    )
    parser.add_argument(
        "--kube-timeout",
        type=_positive,
        default=kube_client.DEFAULT_TIMEOUT_SECONDS,
        help="seconds one Kubernetes API call may take (the operator's and kopf's own)",
    )
    # The client-side rate limits (token buckets, as client-go's --kube-api-qps/-burst).
    limits: tuple[tuple[str, Callable[[str], float], float, str], ...] = (
        (
            "--kube-qps",
            _positive_rate,
            kube_client.DEFAULT_QPS,
            "Kubernetes API requests per second the operator's own client may send on "
            "average; the leader Lease is not limited",
        ),
        (
            "--kube-burst",
            _at_least_one,
            kube_client.DEFAULT_BURST,
            "requests the operator's own client may send at once above --kube-qps",
        ),
        (
            "--resync-qps",
            _positive_rate,
            kube_client.DEFAULT_RESYNC_QPS,
            "requests per second the periodic resync may send (its own limit, on top of "
            "--kube-qps, so repairing drift never delays scaling or warm-up)",
        ),
    )
    for flag, kind, default, text in limits:
        parser.add_argument(flag, type=kind, default=default, help=text)
    parser.add_argument(
        "--prometheus-allowed-url",
        action="append",
        default=[],
        metavar="PREFIX",
        help="scheme://host[:port][/path] a ModelDeployment's spec.scaling.prometheus.url may "
        "start with (repeatable; default: only --prometheus-url)",
    )
    parser.add_argument(
        "--prometheus-auth-dir",
        default=None,
        help="directory of the mounted Secret with Prometheus credentials (files token, "
        "username, password, ca.crt, tls.crt, tls.key; all optional)",
    )
    parser.add_argument(
        "--prometheus-insecure-skip-verify",
        action="store_true",
        help="do not verify Prometheus's TLS certificate (tests only)",
    )
    parser.add_argument(
        "--allow-privileged-pods",
        action="store_true",
        help="let ModelDeployments set what Pod Security `restricted` forbids (privileged, "
        "hostPath, added capabilities, root ...)",
    )
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR")
    election = parser.add_argument_group(
        "leader election", "several replicas; only the one holding the Lease acts"
    )
    election.add_argument(
        "--leader-election", action="store_true", help="elect a leader on a Lease (HA)"
    )
    election.add_argument("--leader-lease-name", default="modelscale-leader")
    election.add_argument(
        "--leader-lease-namespace",
        default=os.environ.get("POD_NAMESPACE", ""),
        help="namespace of the Lease (default: $POD_NAMESPACE)",
    )
    election.add_argument("--leader-lease-duration", type=int, default=8, help="whole seconds")
    election.add_argument("--leader-renew-deadline", type=float, default=6.0)
    election.add_argument("--leader-retry-period", type=float, default=2.0)
    args = parser.parse_args(argv)
    try:
        args.prometheus_access = connection.access(
            default_url=args.prometheus_url,
            allowed=args.prometheus_allowed_url,
            credentials_dir=args.prometheus_auth_dir,
            insecure_skip_verify=args.prometheus_insecure_skip_verify,
        )
    except connection.URLRefusedError as err:
        parser.error(str(err))
    if not args.all_namespaces and not args.namespace:
        args.all_namespaces = True
    if args.leader_election:
        problem = leader.settings_problem(election_settings(args))
        if problem:
            parser.error(problem)
    return args


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, not {text!r}")
    return value


def _positive_rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(
            f"must be a number of requests per second > 0, not {text!r}"
        )
    return value


def _at_least_one(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of requests >= 1, not {text!r}")
    return value


class RedactedDiffBaseStorage(kopf.StatusDiffBaseStorage):
    """kopf keeps the last handled spec in status to compute diffs; env values there
    would copy whatever a user put in `spec.server.env[].value` (a token, a password) into
    status, which more people may read. Store a digest instead: a changed value still
    changes the digest, so kopf still sees the update."""

    def build(
        self, *, body: kopf.Body, extra_fields: Iterable[kopf.FieldSpec] | None = None
    ) -> kopf.BodyEssence:
        essence = super().build(body=body, extra_fields=extra_fields)
        server = essence.get("spec", {}).get("server", {})
        for env in server.get("env") or ():
            if isinstance(env, dict) and isinstance(env.get("value"), str):
                digest = hashlib.sha256(env["value"].encode()).hexdigest()[:16]
                env["value"] = f"sha256:{digest}"
        return essence


def election_settings(args: argparse.Namespace) -> leader.ElectionSettings:
    return leader.ElectionSettings(
        lease_name=args.leader_lease_name,
        namespace=args.leader_lease_namespace,
        identity=leader.identity(),
        lease_duration=args.leader_lease_duration,
        renew_deadline=args.leader_renew_deadline,
        retry_period=args.leader_retry_period,
    )


def build_settings(args: argparse.Namespace) -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    # Handler progress and the last-handled spec live in status: annotations on the
    # user's object would show up as drift in Argo CD / Flux.
    settings.persistence.progress_storage = kopf.StatusProgressStorage(field="status.kopf.progress")
    settings.persistence.diffbase_storage = RedactedDiffBaseStorage(
        field="status.kopf.lastHandledConfiguration"
    )
    settings.posting.level = logging.INFO
    settings.networking.error_backoffs = [1, 2, 5, 10, 30, 60]
    settings.execution.max_workers = 32
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    # kopf's own non-watch calls (patches, events, the CRD scan): its default is 300 s.
    settings.networking.request_timeout = args.kube_timeout
    settings.networking.connect_timeout = min(10.0, args.kube_timeout)
    return settings


def operator_config(args: argparse.Namespace) -> OperatorConfig:
    return OperatorConfig(
        prometheus_url=args.prometheus_url,
        autoscale_interval=args.autoscale_interval,
        resync_interval=args.resync_interval,
        namespaces=() if args.all_namespaces else tuple(args.namespace),
        prometheus_access=args.prometheus_access,
        allow_privileged_pods=args.allow_privileged_pods,
    )


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    # An admin whose ModelDeployment "does nothing" looks here first: a namespaced install
    # (chart value watchNamespaces) has no rights elsewhere, so it never sees the others.
    if args.all_namespaces:
        logging.getLogger(__name__).info("watching ModelDeployments in every namespace")
    else:
        logging.getLogger(__name__).info(
            "watching ModelDeployments only in namespaces %s (chart value watchNamespaces): "
            "ModelDeployments in any other namespace are not reconciled, scaled or warmed up",
            ", ".join(args.namespace),
        )
    # Importing the handler modules registers their kopf handlers.
    from modelscale.handlers import (  # noqa: F401, PLC0415
        autoscale,
        health,
        indexes,
        reconcile,
        runtime,
        warmup,
    )

    lease_api = kube_client.load(timeout_seconds=args.kube_timeout)
    leadership = (
        leader.Leadership.elect(api=lease_api, settings=election_settings(args))
        if args.leader_election
        else leader.Leadership.standalone()
    )

    # Every write the operator makes goes through these clients, and they refuse them while
    # this replica does not hold a valid lease (the Lease itself uses `lease_api`). Three
    # budgets, so bulk work cannot starve what is on the traffic path: the reconcile
    # handlers (a thousand new ModelDeployments) and the scaling pass with the warm-up
    # each get --kube-qps/--kube-burst, the periodic resync --resync-qps.
    def fenced(qps: float, burst: int) -> client.ApiClient:
        limiter = kube_client.TokenBucket(qps=qps, burst=burst)
        return lease.fence_writes(
            kube_client.load(timeout_seconds=args.kube_timeout, limiter=limiter),
            fence=leadership.holds,
        )

    loops_api = fenced(args.kube_qps, args.kube_burst)
    shared = runtime.Runtime(
        config=operator_config(args),
        api=fenced(args.kube_qps, args.kube_burst),
        loops_api=loops_api,
        resync_api=fenced(args.resync_qps, max(1, math.ceil(args.resync_qps))),
        warmup=WarmupRunner(loops_api, leader=leadership),
        leader=leadership,
    )

    prometheus_client.start_http_server(args.metrics_port)
    telemetry.start_memory_reports()
    kopf.run(
        settings=build_settings(args),
        standalone=True,
        clusterwide=args.all_namespaces,
        namespaces=args.namespace,
        liveness_endpoint=f"http://0.0.0.0:{args.health_port}/healthz",
        memo=kopf.Memo({runtime.MEMO_KEY: shared}),
    )
    return 0
