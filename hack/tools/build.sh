#!/usr/bin/env bash
# Builds the lab's control-plane tools from pinned Go modules into a cache outside the
# clone, keyed by the pinned versions, so fresh
# clones and CI runs on the same machine reuse them. Idempotent: a second run with
# everything present only hashes a few files.
#
#   hack/tools/build.sh                 build what is missing, print the bin dir
#   hack/tools/build.sh --only NAME...  build only the tools providing these binaries
#                                       (make image: crane, not the lab's control plane)
#   hack/tools/build.sh --print-bin-dir print the bin dir without building
#   hack/tools/build.sh --check         exit 1 unless every tool is already built
#
# VALTUNE_CACHE overrides the cache root (default ~/.cache/valtune).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${VALTUNE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/valtune}

K8S_VERSION=v1.34.2

# The Go checksum database is unreachable here; go.sum is committed, so hashes stay pinned.
export GOSUMDB=off GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0

log() { printf '[tools] %s\n' "$*" >&2; }

# key NAME FILES...: a directory name that changes whenever a pinned input changes.
key() {
  local name=$1
  shift
  printf '%s-%s' "$name" "$(cat "$@" | sha256sum | cut -c1-12)"
}

k8s_key=$(key kubernetes "$here/kubernetes/go.mod" "$here/kubernetes/go.sum")
etcd_key=$(key etcd "$here/etcd/go.mod" "$here/etcd/go.sum")
kwok_key=$(key kwok "$here/kwok/go.mod" "$here/kwok/go.sum")
helm_key=$(key helm "$here/helm/go.mod" "$here/helm/go.sum")
po_key=$(key prometheus-operator "$here/prometheus-operator/go.mod" "$here/prometheus-operator/go.sum")
prom_key=$(key prometheus "$here/prometheus/go.mod" "$here/prometheus/go.sum")
pe_key=$(key process-exporter "$here/process-exporter/go.mod" "$here/process-exporter/go.sum")
vma_key=$(key vmagent "$here/vmagent/go.mod" "$here/vmagent/go.sum")
kc_key=$(key kubeconform "$here/kubeconform/go.mod" "$here/kubeconform/go.sum")
crane_key=$(key crane "$here/crane/go.mod" "$here/crane/go.sum")
lua_key=$(key luahealth "$here/luahealth/go.mod" "$here/luahealth/go.sum" "$here/luahealth/main.go")
bin_dir="$cache/bin/$(printf '%s\n' "$k8s_key" "$etcd_key" "$kwok_key" "$helm_key" "$po_key" "$prom_key" "$pe_key" "$vma_key" "$kc_key" "$crane_key" "$lua_key" | sha256sum | cut -c1-12)"

# tool key -> binaries it provides
declare -A provides=(
  [$k8s_key]="kube-apiserver kube-scheduler kube-controller-manager kubectl"
  [$etcd_key]="etcd"
  [$kwok_key]="kwok"
  [$helm_key]="helm"
  [$po_key]="prometheus-operator"
  [$prom_key]="prometheus promtool"
  [$pe_key]="process-exporter"
  [$vma_key]="vmagent"
  [$kc_key]="kubeconform"
  [$crane_key]="crane"
  [$lua_key]="luahealth"
)

built() { # built KEY: every binary of KEY is present
  local b
  for b in ${provides[$1]}; do [ -x "$cache/tools/$1/$b" ] || return 1; done
}

all_built() {
  local k
  for k in "${!provides[@]}"; do built "$k" || return 1; done
  return 0
}

only=()
case "${1:-}" in
  --print-bin-dir) echo "$bin_dir"; exit 0 ;;
  --check) all_built && [ -d "$bin_dir" ]; exit $? ;;
  --only)
    shift
    [ $# -gt 0 ] || { echo "usage: $0 --only NAME..." >&2; exit 2; }
    only=("$@")
    ;;
  "") ;;
  *) echo "usage: $0 [--only NAME...|--print-bin-dir|--check]" >&2; exit 2 ;;
esac

# want KEY: whether this run builds KEY (everything, or what --only names).
want() {
  [ ${#only[@]} -eq 0 ] && return 0
  local b o
  for b in ${provides[$1]}; do
    for o in "${only[@]}"; do [ "$b" = "$o" ] && return 0; done
  done
  return 1
}

# go_build KEY MODULE_DIR LDFLAGS [NAME=]PKG...: builds each main package into the KEY
# dir, as NAME or the package's last path element.
go_build() {
  local k=$1 mod=$2 ldflags=$3
  shift 3
  want "$k" || return 0
  built "$k" && return 0
  local tmp="$cache/tools/.$k.tmp.$$" start=$SECONDS
  rm -rf "$tmp" && mkdir -p "$tmp"
  log "building $k (first build of this version; see README for timings)"
  local spec name pkg
  for spec in "$@"; do
    pkg=${spec#*=}
    name=${spec%%=*}
    [ "$name" = "$spec" ] && name=${pkg##*/}
    (cd "$here/$mod" && go build -trimpath -ldflags "-s -w $ldflags" -o "$tmp/$name" "$pkg")
  done
  rm -rf "$cache/tools/$k" && mv "$tmp" "$cache/tools/$k"
  log "built $k in $((SECONDS - start))s"
}

mkdir -p "$cache/tools"
# Two clones (or CI beside a session) may build at once: one builds, the other waits.
exec 9>"$cache/tools/.lock"
flock 9

k8s_ldflags="-X k8s.io/component-base/version.gitVersion=$K8S_VERSION"
k8s_ldflags+=" -X k8s.io/component-base/version.gitMajor=1"
k8s_ldflags+=" -X k8s.io/component-base/version.gitMinor=34"
k8s_ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
k8s_ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION"

go_build "$etcd_key" etcd "" etcd=go.etcd.io/etcd/server/v3
go_build "$kwok_key" kwok "-X sigs.k8s.io/kwok/pkg/consts.Version=v0.7.0" sigs.k8s.io/kwok/cmd/kwok
go_build "$helm_key" helm "-X helm.sh/helm/v3/internal/version.version=v3.17.3" helm.sh/helm/v3/cmd/helm
go_build "$po_key" prometheus-operator "-X github.com/prometheus/common/version.Version=0.80.1" \
  prometheus-operator=github.com/prometheus-operator/prometheus-operator/cmd/operator
go_build "$k8s_key" kubernetes "$k8s_ldflags" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler \
  k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl
# Upstream, not Debian's package: that one is built without Kubernetes service discovery.
go_build "$prom_key" prometheus "-X github.com/prometheus/common/version.Version=3.2.1" \
  github.com/prometheus/prometheus/cmd/prometheus github.com/prometheus/prometheus/cmd/promtool

# The exporters the lab runs for trial pods' sidecars, as the images would.
go_build "$pe_key" process-exporter "-X github.com/prometheus/common/version.Version=0.8.7" \
  github.com/ncabatoff/process-exporter/cmd/process-exporter
go_build "$vma_key" vmagent "-X github.com/VictoriaMetrics/VictoriaMetrics/lib/buildinfo.Version=vmagent-v1.110.0" \
  github.com/VictoriaMetrics/VictoriaMetrics/app/vmagent

# The chart's checks (make chart-test) and the operator image (make image).
go_build "$kc_key" kubeconform "-X main.version=v0.8.0" github.com/yannh/kubeconform/cmd/kubeconform
go_build "$crane_key" crane "-X github.com/google/go-containerregistry/cmd/crane/cmd.Version=v0.22.1" \
  github.com/google/go-containerregistry/cmd/crane
# Argo CD's Lua for health checks (gopher-lua v1.1.2), with valtune's harness around it.
go_build "$lua_key" luahealth "" valtune.dev/hack/tools/luahealth

# One directory of links so callers need a single path. (After --only some links wait
# for their tool's build: the paths are fixed by the pinned versions.)
if [ ! -d "$bin_dir" ]; then
  tmp="$bin_dir.tmp.$$"
  mkdir -p "$tmp"
  for k in "${!provides[@]}"; do
    for b in ${provides[$k]}; do ln -sf "$cache/tools/$k/$b" "$tmp/$b"; done
  done
  mv "$tmp" "$bin_dir"
fi
echo "$bin_dir"
