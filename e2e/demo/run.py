"""`make demo`: the operator at work on the local cluster, in about five minutes.

Starts (or reuses) the local cluster and its Prometheus, installs the operator with the
Helm chart, applies a ModelDeployment of the toy LLM on the real Triton, and replays the
Azure LLM conversation trace (bench/traces) through the Service's ready endpoints, time-
compressed by a factor that rises and falls like a day's load (0.8x -> 3x -> 0.6x). A live
table shows what the users get and what the operator decides; at the end a summary and
`demo-report.png`.

`python -m demo [run] [--duration S] ...` (PYTHONPATH=e2e) or `make demo`;
`python -m demo down` (`make demo-down`) removes the release and the demo namespace.
Ctrl-C stops the load, uninstalls, and takes the cluster down if the demo started it.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import json
import pathlib
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from types import FrameType
from typing import Any, TextIO

from kubernetes import client
from kubernetes import config as kube_config
from rich import box
from rich.console import Console
from rich.live import Live as RichLive
from rich.table import Table

from demo import report
from harness import cluster, loadgen, operator_chart, toy_load, userview
from harness.toy_load import MAX_REPLICAS, MIN_REPLICAS, SLO_P99_S, TOY_ENV
from modelscale import podfacts

REPO, CHART = operator_chart.REPO, operator_chart.CHART
TRACE = REPO / "bench" / "traces" / "azure2023_conv_normalized.csv.gz"
RELEASE, OPERATOR_NAMESPACE = operator_chart.RELEASE, operator_chart.OPERATOR_NAMESPACE
NAMESPACE = "modelscale-demo"
NAME = "toy-llm"
GROUP, VERSION, PLURAL = "modelscale.dev", "v1alpha1", "modeldeployments"
# One helm release per cluster: the e2e suite's operator fixture takes the same lock.
OPERATOR_LOCK = pathlib.Path("/run/lock/modelscale-operator.lock")

# (share of the run, trace offset in s, time compression): a real trace, compressed more
# at the "peak of the day" so the load rises past one pod's knee and falls back.
SHAPE = (
    (0.10, 0, 0.8),
    (0.10, 1200, 1.5),
    (0.10, 1245, 2.0),
    (0.15, 1380, 3.0),
    # The evening, long enough to see the scale-down: the forecast's upper bound comes
    # down about 100 s after the load, then the 30-s scale-down window.
    (0.55, 1600, 0.6),
)


def modeldeployment() -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ModelDeployment",
        "metadata": {"name": NAME, "namespace": NAMESPACE},
        "spec": {
            # backend vllm: the toy exports vLLM's metric names, read with the vLLM presets.
            "model": {"name": "toy_llm", "repository": "/models", "backend": "vllm"},
            "server": {
                "image": "nvcr.io/nvidia/tritonserver:24.10-py3",
                "gpus": 1,
                "env": [{"name": k, "value": v} for k, v in TOY_ENV.items()],
                "drainSeconds": 1,
                "terminationGracePeriodSeconds": 10,
            },
            "minReplicas": MIN_REPLICAS,
            "maxReplicas": MAX_REPLICAS,
            "scaling": {
                "mode": "Predictive",
                "targets": {
                    "tokensPerSecondPerReplica": 400,
                    "latencySLO": {"signal": "EndToEnd", "p99Seconds": SLO_P99_S},
                    "headroom": 0.8,
                },
                "forecast": {"horizonSeconds": 20},
                "scaleDown": {"stabilizationWindowSeconds": 30},
            },
            "warmUp": {
                "count": 4,
                "concurrency": 2,
                "success": {"stableLastN": 2, "maxLatencyFactor": 3},
            },
        },
    }


def shaped_trace(duration_s: float) -> list[loadgen.TraceRequest]:
    out: list[loadgen.TraceRequest] = []
    offset = 0.0
    for share, trace_start, speedup in SHAPE:
        wall = share * duration_s
        part = loadgen.read_trace(
            TRACE, start_s=trace_start, duration_s=wall * speedup, speedup=speedup
        )
        out.extend(dataclasses.replace(r, t_s=r.t_s + offset) for r in part)
        offset += wall
    return out


# --------------------------------------------------------------------------- shell


def say(msg: str) -> None:
    print(f"[demo] {msg}", file=sys.stderr, flush=True)


class StopDemo(Exception):  # noqa: N818  (not an error: the user asked to stop)
    """SIGINT or SIGTERM: stop and clean up."""


def _raise_interrupted(signum: int, frame: FrameType | None) -> None:
    raise StopDemo(signal.Signals(signum).name)


def helm(info: cluster.ClusterInfo, *args: str, timeout: float = 300) -> None:
    argv = [str(info.bin_dir / "helm"), "--kubeconfig", str(info.kubeconfig), *args]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"helm {args[0]} failed: {proc.stderr.strip() or proc.stdout}")


def kubectl(info: cluster.ClusterInfo, *args: str, stdin: str | None = None) -> str:
    argv = [str(info.bin_dir / "kubectl"), "--kubeconfig", str(info.kubeconfig), *args]
    proc = subprocess.run(
        argv, input=stdin, capture_output=True, text=True, timeout=120, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout


@contextlib.contextmanager
def operator_lock(timeout_s: float) -> Iterator[None]:
    OPERATOR_LOCK.parent.mkdir(parents=True, exist_ok=True)
    with OPERATOR_LOCK.open("w") as fh:
        deadline = time.monotonic() + timeout_s
        waited = False
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"another test session has the operator installed ({OPERATOR_LOCK} "
                        f"held for {timeout_s:.0f} s): wait for it to finish, then retry"
                    ) from None
                if not waited:
                    say("waiting for another session's operator release to finish ...")
                    waited = True
                time.sleep(1)
        yield


def install(info: cluster.ClusterInfo) -> None:
    say(f"installing the operator with the Helm chart ({CHART.relative_to(REPO)}) ...")
    start = time.monotonic()
    if _release_exists(info):  # a release left by an interrupted run or another session
        helm(info, "-n", OPERATOR_NAMESPACE, "uninstall", RELEASE, "--wait", timeout=180)
    adopt_crd(info)
    helm(
        info,
        "-n",
        OPERATOR_NAMESPACE,
        *operator_chart.install_args(prometheus_url=info.prometheus_url),
        timeout=240,
    )
    say(f"operator Ready in {time.monotonic() - start:.0f} s")


def adopt_crd(info: cluster.ClusterInfo) -> None:
    """The chart owns the CRD (so `helm upgrade` upgrades it) and refuses one applied with
    kubectl (`make test`'s apiserver tests, or a user's earlier `kubectl apply`). On the
    demo's own local cluster, take it over the way the chart README tells users to."""
    crd = "crd/modeldeployments.modelscale.dev"
    try:
        owner = kubectl(
            info, "get", crd, "-o", "jsonpath={.metadata.annotations.meta\\.helm\\.sh/release-name}"
        )
    except RuntimeError:
        return  # no CRD yet: the chart creates it
    if owner.strip() == RELEASE:
        return
    say("adopting the ModelDeployment CRD applied earlier (not by this Helm release) ...")
    kubectl(
        info,
        "annotate",
        crd,
        f"meta.helm.sh/release-name={RELEASE}",
        f"meta.helm.sh/release-namespace={OPERATOR_NAMESPACE}",
        "--overwrite",
    )
    kubectl(info, "label", crd, "app.kubernetes.io/managed-by=Helm", "--overwrite")


def _release_exists(info: cluster.ClusterInfo) -> bool:
    argv = [str(info.bin_dir / "helm"), "--kubeconfig", str(info.kubeconfig)]
    proc = subprocess.run(
        [*argv, "-n", OPERATOR_NAMESPACE, "status", RELEASE],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return proc.returncode == 0


def remove(info: cluster.ClusterInfo) -> None:
    """The demo namespace (its ModelDeployment first, so the operator deletes its pods) and
    the helm release. Idempotent."""
    subprocess.run(
        [str(info.bin_dir / "kubectl"), "--kubeconfig", str(info.kubeconfig), "delete",
         "namespace", NAMESPACE, "--ignore-not-found", "--wait=true", "--timeout=90s"],
        capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    if _release_exists(info):
        helm(info, "-n", OPERATOR_NAMESPACE, "uninstall", RELEASE, "--wait", timeout=180)


class Watcher:
    """Every second: the ModelDeployment's status and every pod seen (kept after deletion,
    so a removed pod's warm-up time stays known)."""

    def __init__(self, api: Any) -> None:
        self.api = api
        self.samples: list[report.Sample] = []
        self.pods: dict[str, dict[str, Any]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="watcher", daemon=True)

    def once(self) -> None:
        custom = client.CustomObjectsApi(self.api)
        core = client.CoreV1Api(self.api)
        md = custom.get_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, NAME)
        now = time.time()
        self.samples.append(report.Sample.from_status(now, None, md.get("status") or {}))
        pods = core.list_namespaced_pod(NAMESPACE, label_selector=f"{podfacts.MD_LABEL}={NAME}")
        for pod in pods.items:
            body = self.api.sanitize_for_serialization(pod)
            self.pods[body["metadata"]["uid"]] = body

    def _loop(self) -> None:
        while not self._stop.wait(1.0):
            with contextlib.suppress(Exception):  # keep sampling through apiserver hiccups
                self.once()

    def start(self) -> Watcher:
        self.once()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def wait_first_pod_warmed(watcher: Watcher, *, timeout_s: float) -> None:
    say("waiting for the first Triton pod to load the model and be warmed up ...")
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        watcher.once()
        if watcher.samples[-1].warmed >= 1 and watcher.samples[-1].ready >= 1:
            say(f"first pod warmed and Ready in {time.monotonic() - start:.0f} s")
            return
        time.sleep(1)
    raise RuntimeError(
        f"no pod of {NAMESPACE}/{NAME} was warmed within {timeout_s:.0f} s: "
        f"see `kubectl -n {NAMESPACE} describe mdep {NAME}` and the operator's log"
    )


class Live:
    """The live table: rich when stdout is a terminal, plain lines otherwise."""

    def __init__(self, out: TextIO) -> None:
        self.rows: list[tuple[str, ...]] = []
        self.tty = out.isatty()
        self._live: Any = None
        if self.tty:
            self._live = RichLive(console=Console(file=out), refresh_per_second=2)
        else:
            print("  ".join(c.replace("\n", " ") for c in report.COLUMNS), file=out, flush=True)
        self.out = out

    def _table(self, footer: str) -> Any:
        table = Table(
            title=f"modelscale demo: {NAMESPACE}/{NAME}",
            caption=footer,
            box=box.SIMPLE_HEAD,
            pad_edge=False,
        )
        for col in report.COLUMNS:
            last = col == report.COLUMNS[-1]
            table.add_column(col, justify="left" if last else "right", no_wrap=True)
        for row in self.rows[-15:]:
            style = "red" if "OVER" in row[4] else None
            table.add_row(*row, style=style)
        return table

    def add(self, row: tuple[str, ...], footer: str) -> None:
        self.rows.append(row)
        if self._live is not None:
            self._live.update(self._table(footer))
        else:
            print("  ".join(row), file=self.out, flush=True)

    def __enter__(self) -> Live:
        if self._live is not None:
            self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.stop()


@dataclasses.dataclass(frozen=True)
class Options:
    duration_s: float
    report_path: pathlib.Path
    summary_json: pathlib.Path | None
    cleanup: bool
    first_pod_timeout_s: float


def run(opts: Options) -> int:
    signal.signal(signal.SIGINT, _raise_interrupted)
    signal.signal(signal.SIGTERM, _raise_interrupted)
    t_begin = time.monotonic()
    started_cluster = False
    info: cluster.ClusterInfo | None = None
    try:
        if cluster.running():
            say("reusing the local cluster that is already running")
        else:
            say("starting the local cluster (etcd, control plane, 3 fake GPU nodes, Prometheus)")
            started_cluster = True
        info = cluster.up()
        t_up = time.monotonic()
        with operator_lock(timeout_s=900):
            install(info)
            if f"namespace/{NAMESPACE}" not in kubectl(info, "get", "namespaces", "-o", "name"):
                kubectl(info, "create", "namespace", NAMESPACE)
            kubectl(info, "apply", "-f", "-", stdin=json.dumps(modeldeployment()))
            say(f"applied ModelDeployment {NAMESPACE}/{NAME} (toy LLM on the real Triton)")
            new_client: Any = kube_config.new_client_from_config
            api = new_client(config_file=str(info.kubeconfig))
            watcher = Watcher(api)
            wait_first_pod_warmed(watcher, timeout_s=opts.first_pod_timeout_s)
            requests = shaped_trace(opts.duration_s)
            say(
                f"replaying {len(requests)} requests of {TRACE.name} over "
                f"{opts.duration_s:.0f} s (time compression 0.8x -> 3x -> 0.6x) "
                f"through the ready endpoints of Service {NAMESPACE}/{NAME}; SLO: "
                f"P99 end-to-end <= {SLO_P99_S:g} s"
            )
            summary = _replay(api, watcher, requests, opts)
            say(f"cluster up -> summary: {time.monotonic() - t_up:.0f} s "
                f"(whole run {time.monotonic() - t_begin:.0f} s)")  # fmt: skip
            print("\n".join(["", "Summary", *(f"  {line}" for line in summary.lines())]))
            print(f"  report: {opts.report_path}")
            if opts.summary_json is not None:
                opts.summary_json.write_text(json.dumps(dataclasses.asdict(summary), indent=2))
            if opts.cleanup:
                remove(info)
                if started_cluster:
                    cluster.down()
            else:
                print(
                    f"\nStill running: export KUBECONFIG={info.kubeconfig}; "
                    f"{info.bin_dir / 'kubectl'} -n {NAMESPACE} get mdep,pods\n"
                    "Remove everything: make demo-down"
                )
        return 0
    except StopDemo as why:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        say(f"{why}: stopping the load and cleaning up (this takes up to a minute) ...")
        if info is not None and cluster.running():
            with contextlib.suppress(Exception):
                remove(info)
        if started_cluster:
            cluster.down()
        return 130


def _replay(
    api: Any, watcher: Watcher, requests: Sequence[loadgen.TraceRequest], opts: Options
) -> report.Summary:
    with loadgen.EndpointPoller(
        lambda: loadgen.ready_endpoints_from_slices(api, NAMESPACE, NAME), interval_s=0.3
    ) as endpoints:
        watcher.start()
        try:
            started = time.time()
            replay = loadgen.start_replay(requests, endpoints=endpoints, **toy_load.REPLAY)
            try:
                with Live(sys.stdout) as live:
                    next_row = started + userview.WINDOW_S
                    end = started + opts.duration_s
                    while time.time() < end:
                        time.sleep(max(0.0, min(next_row, end) - time.time()))
                        if time.time() >= next_row and watcher.samples:
                            now = time.time()
                            row = report.live_row(
                                now=now,
                                started_at=started,
                                records=replay.records_so_far(),
                                sample=watcher.samples[-1],
                            )
                            last = watcher.samples[-1]
                            live.add(
                                report.row_cells(row, slo_p99_s=SLO_P99_S),
                                f"{last.reason}: {last.message}",
                            )
                            next_row += userview.WINDOW_S
                result = replay.wait(120)
            finally:
                replay.stop()
            finished = time.time()
            # A little longer, so the figure shows the scale-down after the load.
            time.sleep(5)
        finally:
            watcher.stop()
    samples = list(watcher.samples)
    pods = list(watcher.pods.values())
    summary = report.summarize(
        records=result.records,
        samples=samples,
        pods=pods,
        started_at=started,
        finished_at=finished,
        slo_p99_s=SLO_P99_S,
    )
    report.plot(
        opts.report_path,
        records=result.records,
        samples=samples,
        started_at=started,
        slo_p99_s=SLO_P99_S,
        title=f"modelscale demo: {TRACE.name}, {opts.duration_s:.0f} s, SLO P99 {SLO_P99_S:g} s",
    )
    return summary


def down() -> int:
    """`make demo-down`: the demo's namespace and the helm release (the Makefile then takes
    the cluster down)."""
    if not cluster.running():
        say("no local cluster running: nothing to remove")
        return 0
    info = cluster.info()
    say(f"removing namespace {NAMESPACE} and helm release {OPERATOR_NAMESPACE}/{RELEASE} ...")
    remove(info)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m demo", description=__doc__.split("\n")[0])
    parser.add_argument("command", nargs="?", default="run", choices=["run", "down"])
    parser.add_argument(
        "--duration", type=float, default=270.0, help="seconds of load (default 270)"
    )
    parser.add_argument("--report", type=pathlib.Path, default=pathlib.Path("demo-report.png"))
    parser.add_argument("--summary-json", type=pathlib.Path, default=None)
    parser.add_argument(
        "--cleanup",
        action="store_true",
        help="at the end remove the release and namespace (and the cluster if the demo "
        "started it) instead of leaving them for a look around",
    )
    parser.add_argument("--first-pod-timeout", type=float, default=300.0)
    args = parser.parse_args(argv)
    if args.command == "down":
        return down()
    if args.duration < 30:
        parser.error("--duration must be at least 30 s (three 10-s windows)")
    try:
        return run(
            Options(
                duration_s=args.duration,
                report_path=args.report,
                summary_json=args.summary_json,
                cleanup=args.cleanup,
                first_pod_timeout_s=args.first_pod_timeout,
            )
        )
    except (RuntimeError, cluster.ClusterError) as err:
        say(f"error: {err}")
        say("what was started is left for a look (`make demo-down` removes it)")
        return 1
