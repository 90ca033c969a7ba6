"""Pod runtime for the fake GPU nodes: a kubelet stand-in that makes scheduled pods real.

One daemon (`python -m harness.kubelet`, started by `harness.cluster up`) serves all fake
nodes. It registers the nodes and keeps them Ready (Lease heartbeats plus periodic status
updates), watches the pods bound to them and, for each one, allocates an IP in its node's
range (a /32 on the node namespace's `lo`), starts a real process for the images it knows
inside that namespace, runs the pod's own startup/readiness/liveness probes, and reports
status the way the kubelet does (pkg/kubelet/status/generate.go). It patches only the
conditions it owns, with a strategic-merge patch that merges by `type`, so readiness-gate
conditions written by others (the operator's warm-up) are never clobbered.

Why not KWOK: its pod stages set every readiness gate True, which is exactly the
behaviour the operator's warm-up must not get for free.

Modules, from the outside in:
  runtime     the daemon: pod watch, workers, heartbeats, SD file, kubelet API; `main`
  nodes       node registration, Leases, node status heartbeats
  worker      one pod: start/restart containers, probe, report status, terminate
  podenv      a container's env (ConfigMaps, Secrets, downward API) and pod kubeconfig
  launch      which process an image becomes (argv, env); $(VAR) expansion
  containers  one container's process and status; process-group kill
  probes      probe thresholds and one probe run
  netns       pod IPs and per-pod network namespaces
  status      Ready / ContainersReady by the kubelet's rule; the pod status patch
  sd          Prometheus file_sd targets with Kubernetes SD labels
"""

from harness.kubelet.launch import Launch, PodSpecError, expand
from harness.kubelet.probes import Prober, run_probe
from harness.kubelet.runtime import Runtime, main
from harness.kubelet.sd import sd_targets
from harness.kubelet.status import contains, desired, ready_conditions
from harness.kubelet.worker import PodWorker

__all__ = [
    "Launch",
    "PodSpecError",
    "PodWorker",
    "Prober",
    "Runtime",
    "contains",
    "desired",
    "expand",
    "main",
    "ready_conditions",
    "run_probe",
    "sd_targets",
]
