#!/usr/bin/env bash
# Builds the pinned upstream binaries the local cluster needs (kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl, etcd, helm) from Go modules and
# caches them outside the repo. Prints the bin directory on its last line.
#
# Why wrapper modules: go install refuses k8s.io/kubernetes and etcd's server
# module because their go.mod files carry replace directives (golang/go#35878).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
K8S_VERSION=$(sed -n 's/^require k8s.io\/kubernetes \(v[0-9.]*\)$/\1/p' "$here/kubernetes/go.mod")
ETCD_VERSION=$(sed -n 's/^require go.etcd.io\/etcd\/server\/v3 \(v[0-9.]*\)$/\1/p' "$here/etcd/go.mod")
HELM_VERSION=$(sed -n 's/^require helm.sh\/helm\/v3 \(v[0-9.]*\)$/\1/p' "$here/helm/go.mod")
cache=${MODELSCALE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/modelscale}
bin="$cache/bin/k8s-$K8S_VERSION-etcd-$ETCD_VERSION-helm-$HELM_VERSION"
mkdir -p "$bin"
# Two callers at once (make and a test fixture) wait for each other instead of racing.
exec 9>"$bin/.lock"
flock 9

export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local
# Two cores and 24 GiB: one package graph at a time keeps peak memory reasonable.
export GOMAXPROCS=${GOMAXPROCS:-2}
build_date=$(date -u +%Y-%m-%dT%H:%M:%SZ)

k8s_ldflags() {
  local v=$K8S_VERSION major minor
  major=${v#v}; major=${major%%.*}
  minor=${v#v*.}; minor=${minor%%.*}
  local flags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $pkg.gitVersion=$v -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
    flags+=" -X $pkg.gitCommit=modelscale-modules-build"
  done
  echo "$flags"
}

build() {  # build MODULE_DIR OUTPUT PACKAGE LDFLAGS
  local dir=$1 out=$2 pkg=$3 ldflags=$4
  if [[ -x "$bin/$out" ]]; then
    echo "cached: $bin/$out" >&2
    return
  fi
  echo "building $out from $pkg ..." >&2
  local start=$SECONDS
  (cd "$here/$dir" && go build -trimpath -ldflags "$ldflags" -o "$bin/$out.tmp.$$" "$pkg")
  mv "$bin/$out.tmp.$$" "$bin/$out"
  echo "built $out in $((SECONDS - start)) s" >&2
}

kl=$(k8s_ldflags)
build kubernetes kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$kl"
build kubernetes kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$kl"
build kubernetes kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "$kl"
build kubernetes kubectl k8s.io/kubernetes/cmd/kubectl "$kl"
build etcd etcd go.etcd.io/etcd/server/v3 "-s -w"

k8s_minor=${K8S_VERSION#v1.}; k8s_minor=${k8s_minor%%.*}
hl="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
hl+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
  hl+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
done
build helm helm helm.sh/helm/v3/cmd/helm "$hl"

echo "$bin"
