#!/usr/bin/env bash
# `make e2e-kind`: the e2e suite on kind, for machines WITH Docker and kind (the no-Docker
# development machine uses the local harness instead: `make cluster-up`, `make e2e`).
# Not exercised in this repository's CI; keep it minimal and honest.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
name=modelscale-e2e
state="$repo/.cluster-kind"
for tool in docker kind kubectl; do
  command -v "$tool" >/dev/null || { echo "make e2e-kind needs $tool on PATH" >&2; exit 1; }
done
mkdir -p "$state"
if ! kind get clusters | grep -qx "$name"; then
  kind create cluster --config "$here/kind-config.yaml" --image "${KIND_NODE_IMAGE:-kindest/node:v1.34.0}" \
    --kubeconfig "$state/kubeconfig" --wait 120s
fi
kind get kubeconfig --name "$name" > "$state/kubeconfig"
export KUBECONFIG="$state/kubeconfig"
KUBECTL=kubectl bash "$here/gpu-nodes.sh"

# Triton with the toy model baked in at /models.
image=modelscale.local/tritonserver-toy:24.10
docker build -q -t "$image" -f "$here/Dockerfile.triton-toy" "$repo"
kind load docker-image --name "$name" "$image"

# Tests talk to pod IPs (inference, Prometheus scrapes): route each node's pod CIDR via
# the node container (Linux Docker hosts; needs root).
for node in $(kubectl get nodes -o jsonpath='{.items[*].metadata.name}'); do
  cidr=$(kubectl get node "$node" -o jsonpath='{.spec.podCIDR}')
  ip=$(kubectl get node "$node" -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')
  sudo ip route replace "$cidr" via "$ip"
done

export MODELSCALE_E2E_KUBECONFIG="$state/kubeconfig"
export MODELSCALE_E2E_TRITON_IMAGE="$image"
: "${MODELSCALE_E2E_PROMETHEUS_URL:?set it to a Prometheus that scrapes this cluster (see e2e/kind/README.md)}"
cd "$repo"
exec .venv/bin/python -m pytest -q -p no:cacheprovider -m "cluster and not local_runtime" e2e/tests "$@"
