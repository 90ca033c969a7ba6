"""`modelscale recommend NAMESPACE/NAME`: what the autoscaler would do now, and why.

Reads the same inputs as the scaling loop (the ModelDeployment, its pods, its Deployment,
Prometheus) and runs the same policy, but writes nothing."""

from __future__ import annotations

import argparse
import json
import sys
import time

from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException
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
    try:
        api = kube_client.load()
    except ConfigException as err:
        print(
            f"modelscale recommend: no Kubernetes configuration ({err}); set KUBECONFIG or "
            "run inside the cluster",
            file=sys.stderr,
        )
        return 1
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
        url = md.spec.scaling.prometheus.url or args.prometheus_url
        sig = batch.Fetched(
            unreachable={(namespace, name): f"cannot query Prometheus at {url}: {err}"}
        )
    decision = decide(
        md,
        signals=sig.signals.get((namespace, name), Signals()),
        tpot_p99=sig.tpot_p99.get((namespace, name)),
        metrics_error=sig.unreachable.get((namespace, name)),
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
    print(
        "\n".join(
            render_text(
                target=f"{namespace}/{name}",
                mode=md.spec.scaling.mode,
                current=current,
                recommended=rec.replicas,
                reason=f"{rec.reason}: {rec.message}",
                token_rate=obs.token_rate,
                p99_seconds=obs.p99_seconds,
                slo_seconds=md.spec.scaling.targets.latency_slo.p99_seconds,
                slo_signal=md.spec.scaling.targets.latency_slo.signal,
                warmed=obs.warmed_replicas,
                forecast_token_rate=rec.forecast_token_rate,
                forecast_p99_seconds=rec.forecast_p99_seconds,
                horizon_seconds=rec.horizon_seconds,
            )
        )
    )
    return 0


def _num(value: float | None, unit: str, *, digits: int) -> str:
    return "no data" if value is None else f"{value:.{digits}f}{unit}"


def render_text(
    *,
    target: str,
    mode: str,
    current: int,
    recommended: int,
    reason: str,
    token_rate: float | None,
    p99_seconds: float | None,
    slo_seconds: float,
    slo_signal: str,
    warmed: int,
    forecast_token_rate: float | None,
    forecast_p99_seconds: float | None,
    horizon_seconds: float | None,
) -> list[str]:
    """The human-readable answer: one wording per mode, rounded numbers, the SLO shown."""
    if mode == "Predictive":
        action = (
            f"scales {current} → {recommended} replicas"
            if recommended != current
            else f"keeps {current} replicas"
        )
    else:
        noun = "replica" if recommended == 1 else "replicas"
        action = f"recommends {recommended} {noun} (now {current}); {mode}: not acting"
    lines = [
        f"{target} ({mode}): {action}" if mode == "Predictive" else f"{target}: {action}",
        f"  reason:   {reason}",
        f"  now:      {_num(token_rate, ' tok/s', digits=1)}, "
        f"P99 {_num(p99_seconds, ' s', digits=3)} (SLO {slo_seconds:g} s {slo_signal}), "
        f"{warmed} warmed of {current}",
    ]
    if forecast_token_rate is not None:
        lines.append(
            f"  forecast: {forecast_token_rate:.1f} tok/s in {horizon_seconds or 0:.0f} s"
            + (f", P99 {forecast_p99_seconds:.3f} s" if forecast_p99_seconds else "")
        )
    return lines
