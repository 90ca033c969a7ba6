#!/usr/bin/env bash
# Builds the pinned upstream binaries the local cluster needs (kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl, etcd, helm) from Go modules and
# caches them outside the repo. Prints the bin directory on its last line.
#
# Why wrapper modules: go install refuses k8s.io/kubernetes and etcd's server
# module because their go.mod files carry replace directives (golang/go#35878).
set -euo pipefail

# Usage: build.sh [NAME ...]   NAMEs among kube-apiserver kube-controller-manager
# kube-scheduler kubectl etcd helm; none: all six (`make unit` asks for helm only).
#        build.sh keda           KEDA's operator (keda) and metrics API server
# (keda-adapter): only when asked (`make keda-tools`), into their own directory
# keda-<version>, which is then the last line printed (so the six keep their cache).
here=$(cd "$(dirname "$0")" && pwd)
all=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd helm)
only=("$@")
K8S_VERSION=$(sed -n 's/^require k8s.io\/kubernetes \(v[0-9.]*\)$/\1/p' "$here/kubernetes/go.mod")
ETCD_VERSION=$(sed -n 's/^require go.etcd.io\/etcd\/server\/v3 \(v[0-9.]*\)$/\1/p' "$here/etcd/go.mod")
HELM_VERSION=$(sed -n 's/^require helm.sh\/helm\/v3 \(v[0-9.]*\)$/\1/p' "$here/helm/go.mod")
KEDA_VERSION=$(sed -n 's/^require github.com\/kedacore\/keda\/v2 \(v[0-9.]*\)$/\1/p' "$here/keda/go.mod")
cache=${MODELSCALE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/modelscale}
bin="$cache/bin/k8s-$K8S_VERSION-etcd-$ETCD_VERSION-helm-$HELM_VERSION"
if [[ " ${only[*]} " == *" keda "* ]]; then
  ((${#only[@]} == 1)) || { echo "build.sh: build keda on its own: build.sh keda" >&2; exit 2; }
  all=(keda keda-adapter)
  only=("${all[@]}")
  bin="$cache/bin/keda-$KEDA_VERSION"
  # Replace and exclude directives only act in the main module: the wrapper must carry
  # KEDA's own, or the build silently differs from upstream's.
  upstream=$(cd "$here/keda" && GOFLAGS=-mod=mod go mod download -json "github.com/kedacore/keda/v2@$KEDA_VERSION" |
    sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p')
  for directive in replace exclude; do
    want_lines=$(grep "^$directive " "$upstream" | sort) || true
    have_lines=$(grep "^$directive " "$here/keda/go.mod" | sort) || true
    [[ $want_lines == "$have_lines" ]] || {
      echo "build.sh: e2e/tools/keda/go.mod must copy KEDA $KEDA_VERSION's $directive lines:" >&2
      echo "$want_lines" >&2
      exit 2
    }
  done
fi
for name in "${only[@]}"; do
  [[ " ${all[*]} " == *" $name "* ]] || { echo "build.sh: unknown binary '$name' (one of: ${all[*]} keda)" >&2; exit 2; }
done
mkdir -p "$bin"
# Two callers at once (make and a test fixture) wait for each other instead of racing.
exec 9>"$bin/.lock"
flock 9

export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local
# Two cores and 24 GiB: one package graph at a time keeps peak memory reasonable.
export GOMAXPROCS=${GOMAXPROCS:-2}
build_date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
count=${#only[@]}; ((count > 0)) || count=${#all[@]}
missing=0
for name in "${all[@]}"; do
  if (( ${#only[@]} == 0 )) || [[ " ${only[*]} " == *" $name "* ]]; then
    [[ -x "$bin/$name" ]] || missing=$((missing + 1))
  fi
done
if ((missing > 0)); then
  echo "Building $missing pinned binaries from Go modules into $bin" >&2
  if [[ ${all[0]} == keda ]]; then
    echo "(cold, KEDA's two: about 26 min on 2 busy cores, see docs/keda.md; then cached)" >&2
  else
    echo "(cold, all six: about 10 min on 2 cores and a few GB of RAM; then cached)" >&2
  fi
fi

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

# Progress a newcomer can follow: which binary, how many of its packages are compiled,
# time so far. `go build -v` names each package as it compiles it (cached ones are not
# compiled again, so a warm build finishes early); the total comes from `go list -deps`.
progress() {  # progress NAME TOTAL START < go build -v output
  local name=$1 total=$2 start=$3 n=0 line last=$SECONDS
  while IFS= read -r line; do
    if [[ $line =~ ^[A-Za-z0-9._~/-]+$ ]]; then
      n=$((n + 1))
      if [[ -t 2 ]]; then
        printf '\r      %s: %d/%d packages compiled, %ds ' "$name" "$n" "$total" \
          "$((SECONDS - start))" >&2
      elif ((SECONDS - last >= 30)); then
        echo "      $name: $n/$total packages compiled, $((SECONDS - start)) s" >&2
        last=$SECONDS
      fi
    else
      echo "$line" >&2  # compiler errors and warnings
    fi
  done
  [[ -t 2 ]] && printf '\n' >&2
  return 0
}

want() {  # want NAME: is NAME among the binaries asked for (all six when none named)?
  local x asked=("${only[@]}")
  # Not "everything below": KEDA's two (26 min cold) are built only by `build.sh keda`.
  ((${#asked[@]} > 0)) || asked=("${all[@]}")
  for x in "${asked[@]}"; do [[ $x == "$1" ]] && return 0; done
  return 1
}

step=0
build() {  # build MODULE_DIR OUTPUT PACKAGE LDFLAGS
  local dir=$1 out=$2 pkg=$3 ldflags=$4
  want "$out" || return 0
  step=$((step + 1))
  if [[ -x "$bin/$out" ]]; then
    echo "[$step/$count] $out: cached" >&2
    return
  fi
  local start=$SECONDS total
  echo "[$step/$count] $out: resolving $pkg (first time: downloads its Go modules) ..." >&2
  total=$(cd "$here/$dir" && go list -deps "$pkg" | wc -l)
  echo "[$step/$count] $out: building ($total packages) ..." >&2
  (cd "$here/$dir" && go build -v -trimpath -ldflags "$ldflags" -o "$bin/$out.tmp.$$" "$pkg") \
    2>&1 | progress "$out" "$total" "$start"
  mv "$bin/$out.tmp.$$" "$bin/$out"
  echo "[$step/$count] $out: built in $((SECONDS - start)) s" >&2
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

# KEDA's Makefile stamps version.Version and version.GitCommit the same way.
kdl="-s -w -X github.com/kedacore/keda/v2/version.Version=${KEDA_VERSION#v}"
kdl+=" -X github.com/kedacore/keda/v2/version.GitCommit=modelscale-modules-build"
build keda keda github.com/kedacore/keda/v2/cmd/operator "$kdl"
build keda keda-adapter github.com/kedacore/keda/v2/cmd/adapter "$kdl"

echo "$bin"
