#!/usr/bin/env bash
# Build the operator image from ./Dockerfile with the first usable builder of
# IMAGE_BUILDERS (docker needs a reachable daemon; podman and buildah need none).
# Without one it prints one line saying what was tried and exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."
image=${IMAGE:?IMAGE is required}
tried=()
for builder in ${IMAGE_BUILDERS:-docker podman buildah}; do
  if ! command -v "$builder" >/dev/null 2>&1; then
    tried+=("$builder: not on PATH")
    continue
  fi
  if [[ $builder == docker ]] && ! docker info >/dev/null 2>&1; then
    tried+=("docker: daemon not reachable (docker info failed)")
    continue
  fi
  case $builder in
    buildah) cmd=(buildah bud) ;;
    *) cmd=("$builder" build) ;;
  esac
  echo "${cmd[*]} -t $image ."
  exec "${cmd[@]}" -t "$image" .
done
joined=$(printf '%s; ' "${tried[@]}")
echo "make image: no usable image builder (${joined%; }); install podman or buildah, or start Docker" >&2
exit 1
