"""`modelscale recommend NAMESPACE/NAME`: what the autoscaler would do now, and why.

Reads the same inputs as the scaling loop (the ModelDeployment, its pods, its Deployment,
Prometheus) and runs the same policy, but writes nothing."""

from __future__ import annotations

import argparse
import json
import sys
import time

from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError

from modelscale import podfacts
from modelscale.api.v1alpha1 import ModelDeployment
from modelscale.control import validation
from modelscale.control.decide import decide
from modelscale.kube import apply as kube_apply
from modelscale.kube import client as kube_client
from modelscale.kube import reads
from modelscale.metrics import batch, groups
from modelscale.metrics.prometheus import PrometheusError
from modelscale.metrics.promql import Signals
from modelscale.resources import names


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="modelscale recommend", description=__doc__)
    parser.add_argument("target", metavar="NAMESPACE/NAME")
    parser.add_argument(
        "--prometheus-url",
        default="http://127.0.0.1:9090",
        help="used unless the ModelDeployment sets spec.scaling.prometheus.url",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.target.count("/") != 1:
        print(
            "modelscale recommend: give the target as NAMESPACE/NAME, e.g. llm/llama",
            file=sys.stderr,
        )
        return 2
    namespace, name = args.target.split("/")
    api = kube_client.load()
    try:
        body = reads.get_modeldeployment(api, namespace=namespace, name=name)
    except ApiException as err:
        print(
            f"modelscale recommend: cannot read ModelDeployment {namespace}/{name}: "
            f"{err.status} {err.reason}",
            file=sys.stderr,
        )
        return 1
    try:
        md = ModelDeployment.model_validate(body)
    except ValidationError as err:
        print(f"modelscale recommend: invalid spec: {validation.short(err)}", file=sys.stderr)
        return 1
    now = time.time()
    pods = [
        podfacts.read(p)
        for p in reads.list_pods(api, namespace=namespace, selector=names.selector_string(md))
    ]
    running = kube_apply.read_deployment(api, namespace=namespace, name=names.deployment(md))
    current = running.replicas if running else 0
    try:
        sig = batch.fetch(
            groups.plan(
                [md], pods_by_md={(namespace, name): pods}, default_url=args.prometheus_url
            ),
            namespaces=(),
            now=now,
            strict=True,
        )
    except PrometheusError as err:
        print(
            f"modelscale recommend: Prometheus: {err} (the operator would hold replicas)",
            file=sys.stderr,
        )
        sig = batch.Fetched()
    decision = decide(
        md,
        signals=sig.signals.get((namespace, name), Signals()),
        tpot_p99=sig.tpot_p99.get((namespace, name)),
        pods=pods,
        current=current,
        now=now,
    )
    rec, obs = decision.recommendation, decision.observation
    acting = md.spec.scaling.mode == "Predictive"
    if args.json:
        print(
            json.dumps(
                {
                    "modelDeployment": f"{namespace}/{name}",
                    "mode": md.spec.scaling.mode,
                    "currentReplicas": current,
                    "warmedReplicas": obs.warmed_replicas,
                    "recommendedReplicas": rec.replicas,
                    "reason": rec.reason,
                    "message": rec.message,
                    "tokenRate": obs.token_rate,
                    "p99Seconds": obs.p99_seconds,
                    "forecastTokenRate": rec.forecast_token_rate,
                    "forecastP99Seconds": rec.forecast_p99_seconds,
                    "horizonSeconds": rec.horizon_seconds,
                    "wouldAct": acting and rec.replicas != current,
                }
            )
        )
        return 0
    verb = "would scale" if acting and rec.replicas != current else "would keep"
    print(
        f"{namespace}/{name} ({md.spec.scaling.mode}): {verb} {current} → {rec.replicas} replicas"
    )
    print(f"  reason:   {rec.reason}: {rec.message}")
    print(
        f"  now:      {obs.token_rate if obs.token_rate is not None else 'no data'} tok/s, "
        f"P99 {obs.p99_seconds if obs.p99_seconds is not None else 'no data'} s, "
        f"{obs.warmed_replicas} warmed of {current}"
    )
    if rec.forecast_token_rate is not None:
        print(
            f"  forecast: {rec.forecast_token_rate:.1f} tok/s in {rec.horizon_seconds or 0:.0f} s"
            + (f", P99 {rec.forecast_p99_seconds:.3f} s" if rec.forecast_p99_seconds else "")
        )
    return 0
