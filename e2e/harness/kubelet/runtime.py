"""The pod runtime daemon: one watch on the pods bound to the fake nodes, one worker per
pod, node heartbeats, the Prometheus SD file and the kubelet API (logs)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import threading
import time
from typing import Any

from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from harness import kubelet_server
from harness import topology as topo
from harness.cluster import network
from harness.cluster import prometheus as cluster_prometheus
from harness.kubelet import nodes
from harness.kubelet.apionly import ApiOnlyPods
from harness.kubelet.common import CERTS, COMPONENT, POD_LOGS, PODS, now
from harness.kubelet.netns import IPAM
from harness.kubelet.sd import sd_targets
from harness.kubelet.worker import PodWorker

log = logging.getLogger("harness.kubelet")


class Runtime:
    def __init__(self) -> None:
        # The client's partial typing wants model objects; this code sends plain dicts
        # (what the API takes) and reads raw JSON, so the clients are Any here.
        load: Any = config.load_kube_config
        load(config_file=str(CERTS / "kubelet.kubeconfig"))
        self.api: Any = client.ApiClient()
        self.core: Any = client.CoreV1Api(self.api)
        self.coord: Any = client.CoordinationV1Api(self.api)
        self.ipam = IPAM()
        self.workers: dict[str, PodWorker] = {}
        self.workers_lock = threading.Lock()
        self.shutting_down = threading.Event()
        self.node_names = {n.name for n in topo.NODES}
        self.sd_pods: dict[str, dict[str, Any]] = {}
        self.sd_dirty = threading.Event()
        self.api_only = ApiOnlyPods(self.core, self.coord, self.api)

    def heartbeat(self) -> None:
        """Leases every LEASE_PERIOD s, node status every NODE_STATUS_PERIOD s."""
        last_status = time.monotonic()
        while not self.shutting_down.wait(nodes.LEASE_PERIOD):
            try:
                alive = [n for n in topo.NODES if not nodes.held_not_ready(n)]
                for node in alive:
                    nodes.renew_lease(self.core, self.coord, node)
                status_due = time.monotonic() - last_status >= nodes.NODE_STATUS_PERIOD
                if status_due:
                    last_status = time.monotonic()
                    for node in alive:
                        nodes.patch_heartbeat(self.api, self.core, node)
                self.api_only.heartbeat(status=status_due)
            except Exception as err:
                log.warning("heartbeat failed: %s", err)

    def emit_event(
        self, pod: dict[str, Any], *, etype: str, reason: str, message: str, node: topo.FakeNode
    ) -> None:
        meta = pod["metadata"]
        stamp = now()
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta["uid"],
            },
            "reason": reason,
            "message": message[:1000],
            "type": etype,
            "source": {"component": COMPONENT, "host": node.name},
            "reportingComponent": COMPONENT,
            "reportingInstance": node.name,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        try:
            self.core.create_namespaced_event(meta["namespace"], body)
        except ApiException as err:
            # 403 is normal while the namespace terminates (no new objects in it).
            (log.debug if err.status == 403 else log.warning)(
                "event %s for %s/%s not sent: %s",
                reason,
                meta["namespace"],
                meta["name"],
                err.reason,
            )

    # ---- pods
    def pod_alive(self, ns: str, name: str) -> bool:
        with self.workers_lock:
            return any(w.key == f"{ns}/{name}" and not w.gone for w in self.workers.values())

    def forget(self, uid: str) -> None:
        with self.workers_lock:
            self.workers.pop(uid, None)

    def dispatch(self, etype: str, pod: dict[str, Any]) -> None:
        node_name = pod.get("spec", {}).get("nodeName")
        if node_name not in self.node_names:
            if self.api_only.owns(node_name):
                self.api_only.submit(etype, pod)
            return
        uid = pod["metadata"]["uid"]
        if etype == "DELETED":
            self.sd_pods.pop(uid, None)
        else:
            self.sd_pods[uid] = pod
        self.sd_dirty.set()
        with self.workers_lock:
            worker = self.workers.get(uid)
            if etype == "DELETED":
                if worker is not None:
                    worker.deleted()
                return
            if worker is not None:
                worker.update(pod)
                return
            phase = pod.get("status", {}).get("phase")
            if phase in ("Succeeded", "Failed") and not pod["metadata"].get("deletionTimestamp"):
                return
            worker = PodWorker(self, pod)
            self.workers[uid] = worker
        worker.thread.start()

    def watch_pods(self) -> None:
        """List then watch pods bound to any node; relist on every error (resync)."""
        while not self.shutting_down.is_set():
            try:
                resp = self.core.list_pod_for_all_namespaces(
                    field_selector="spec.nodeName!=", _preload_content=False
                )
                listing = json.loads(resp.data)
                seen = set()
                for pod in listing["items"]:
                    seen.add(pod["metadata"]["uid"])
                    self.dispatch("MODIFIED", pod)
                with self.workers_lock:
                    vanished = [wk for uid, wk in self.workers.items() if uid not in seen]
                for gone in vanished:
                    gone.deleted()
                for uid in set(self.sd_pods) - seen:
                    self.sd_pods.pop(uid, None)
                rv = listing["metadata"]["resourceVersion"]
                stream: Any = watch.Watch()  # type: ignore[no-untyped-call]
                for ev in stream.stream(
                    self.core.list_pod_for_all_namespaces,
                    field_selector="spec.nodeName!=",
                    resource_version=rv,
                    timeout_seconds=300,
                    allow_watch_bookmarks=True,
                ):
                    if self.shutting_down.is_set():
                        stream.stop()
                        break
                    if ev["type"] in ("ADDED", "MODIFIED", "DELETED"):
                        self.dispatch(ev["type"], ev["raw_object"])
            except Exception as err:
                if self.shutting_down.is_set():
                    break
                log.warning("pod watch interrupted (%s); relisting", err)
                time.sleep(0.5)

    def write_sd(self) -> None:
        """Rewrite the file_sd file when pods change (atomic rename: Prometheus watches it)."""
        path = cluster_prometheus.SD_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        last = ""
        while not self.shutting_down.is_set():
            if not self.sd_dirty.wait(timeout=1.0):
                continue
            self.sd_dirty.clear()
            text = json.dumps(sd_targets(list(self.sd_pods.values())), indent=1)
            if text != last:
                tmp = path.with_suffix(".tmp")
                tmp.write_text(text)
                tmp.replace(path)
                last = text
            time.sleep(0.1)  # batch bursts of pod updates

    def cleanup_leftovers(self) -> None:
        """Processes of a previous runtime instance (crash) are killed; pods restart."""
        for pid_file in PODS.glob("*/*.pid") if PODS.exists() else []:
            with contextlib.suppress(ValueError, OSError):
                pid = int(pid_file.read_text().split()[0])
                os.killpg(pid, signal.SIGKILL)
        shutil.rmtree(PODS, ignore_errors=True)
        network.delete_pod_namespaces()

    def run(self) -> None:
        self.cleanup_leftovers()
        for attempt in range(60):
            try:
                nodes.register(self.core)
                break
            except Exception as err:
                if attempt == 59:
                    raise
                log.warning("node registration failed (%s); retrying", err)
                time.sleep(1)
        for node in topo.NODES:
            nodes.renew_lease(self.core, self.coord, node)
        kubelet_server.serve(
            addresses=[n.internal_ip for n in topo.NODES],
            port=topo.KUBELET_PORT,
            cert=CERTS / "kubelet-serving.crt",
            key=CERTS / "kubelet-serving.key",
            client_ca=CERTS / "ca.crt",
            log_path=lambda ns, pod, container: POD_LOGS / f"{ns}_{pod}_{container}.log",
            alive=self.pod_alive,
        )
        threading.Thread(target=self.heartbeat, name="heartbeat", daemon=True).start()
        threading.Thread(target=self.watch_pods, name="watch", daemon=True).start()
        threading.Thread(target=self.write_sd, name="prometheus-sd", daemon=True).start()
        threading.Thread(
            target=self.api_only.run, args=(self.shutting_down,), name="api-only", daemon=True
        ).start()
        self.shutting_down.wait()
        # Stop every pod process before exiting (cluster-down).
        with self.workers_lock:
            workers = list(self.workers.values())
        for w in workers:
            w.wake.set()
        for w in workers:
            w.thread.join(timeout=10)
        for w in workers:
            w._kill_all(grace=0)


def main(argv: list[str] | None = None) -> int:
    del argv
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(threadName)s %(message)s"
    )
    logging.getLogger("kubernetes").setLevel(logging.WARNING)
    rt = Runtime()

    def stop(signum: int, frame: Any) -> None:
        del signum, frame
        log.info("stopping: terminating all pod processes")
        rt.shutting_down.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    rt.run()
    return 0
