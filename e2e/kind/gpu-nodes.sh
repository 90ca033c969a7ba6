#!/usr/bin/env bash
# Give kind's worker nodes fake GPUs: `nvidia.com/gpu: 4` in capacity and allocatable
# (node status, a JSON patch on the status subresource, as a device plugin would cause)
# and the labels the suite expects. The kubelet does not remove extended resources it
# did not set, so the patch sticks. Usage: gpu-nodes.sh [kubectl args...]
set -euo pipefail
KUBECTL=${KUBECTL:-kubectl}
GPUS=${GPUS:-4}
PRODUCT=${GPU_PRODUCT:-NVIDIA-A100-SXM4-40GB}

mapfile -t workers < <("$KUBECTL" "$@" get nodes -l '!node-role.kubernetes.io/control-plane' \
  -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}')
if [[ ${#workers[@]} -eq 0 ]]; then
  echo "no worker nodes found" >&2
  exit 1
fi
for node in "${workers[@]}"; do
  "$KUBECTL" "$@" label node "$node" --overwrite \
    "nvidia.com/gpu.product=$PRODUCT" "nvidia.com/gpu.count=$GPUS"
  "$KUBECTL" "$@" patch node "$node" --subresource=status --type=json -p "[
    {\"op\": \"add\", \"path\": \"/status/capacity/nvidia.com~1gpu\", \"value\": \"$GPUS\"},
    {\"op\": \"add\", \"path\": \"/status/allocatable/nvidia.com~1gpu\", \"value\": \"$GPUS\"}]"
  echo "node $node: nvidia.com/gpu=$GPUS ($PRODUCT)"
done
