#!/usr/bin/env bash
# Builds Argo CD for the lab's GitOps tests (`make test-gitops`) from the pinned Go module
# in hack/tools/argocd, into a cache outside the clone keyed by go.mod and go.sum, like
# hack/tools/build.sh; kept apart from it so `make test` and `make tools` never wait for
# it. The directory it prints holds:
#
#   argocd                          the multi-call binary (the CLI under this name)
#   argocd-repo-server              links to it: cmd/main.go at v3.6.2 picks the role
#   argocd-application-controller   from filepath.Base(os.Args[0])
#   helm                            helm 4.3.2, which the repo-server runs to render
#                                   charts (module hack/tools/argocd/helm)
#   git-verify-wrapper.sh,          scripts the repo-server runs (from the module's hack/,
#   gpg-wrapper.sh                  where Argo CD's Dockerfile L62-63 copies them from)
#   crds/                           Argo CD's Application and AppProject CRDs and its
#                                   LICENSE, copied from the module at that version
#
#   hack/tools/build-argocd.sh               build if missing, print the dir
#   hack/tools/build-argocd.sh --print-dir   print the dir without building
#   hack/tools/build-argocd.sh --check       exit 1 unless it is built
#
# VALTUNE_CACHE overrides the cache root (default ~/.cache/valtune).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${VALTUNE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/valtune}
mod="$here/argocd"
ARGOCD_VERSION=v3.6.2

key="argocd-$(cat "$mod/go.mod" "$mod/go.sum" "$mod/helm/go.mod" "$mod/helm/go.sum" | sha256sum | cut -c1-12)"
out="$cache/tools/$key"

built() {
  [ -x "$out/argocd" ] && [ -x "$out/helm" ] && [ -x "$out/git-verify-wrapper.sh" ] &&
    [ -f "$out/crds/application-crd.yaml" ]
}

case "${1:-}" in
  --print-dir) echo "$out"; exit 0 ;;
  --check) built; exit $? ;;
  "") ;;
  *) echo "usage: $0 [--print-dir|--check]" >&2; exit 2 ;;
esac

log() { printf '[tools] %s\n' "$*" >&2; }

# Argo CD v3.6's go.mod says go 1.27.0. Go fetches that toolchain itself, and refuses to
# with GOSUMDB=off (which build.sh sets, the checksum database being unreachable for
# modules here), so this build alone keeps the database on for the toolchain and skips it
# for modules: go.sum is committed, so their hashes stay pinned.
export GOTOOLCHAIN=go1.27.3 GOSUMDB=sum.golang.org GONOSUMDB='*'
export GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0

mkdir -p "$cache/tools"
exec 9>"$cache/tools/.lock-argocd"
flock 9
if built; then
  echo "$out"
  exit 0
fi

start=$SECONDS
tmp="$cache/tools/.$key.tmp.$$"
rm -rf "$tmp" && mkdir -p "$tmp/crds"
log "building Argo CD $ARGOCD_VERSION (first build of this version: about 10-15 min on 2 cores)"
pkg=github.com/argoproj/argo-cd/v3
# The version the binary reports, as Argo CD's Makefile sets it (L186-L192).
(cd "$mod" && go build -trimpath -o "$tmp/argocd" \
  -ldflags "-s -w -X $pkg/common.version=${ARGOCD_VERSION#v} -X $pkg/common.gitTag=$ARGOCD_VERSION -X $pkg/common.gitTreeState=clean" \
  "$pkg/cmd")
(cd "$mod/helm" && go build -trimpath -o "$tmp/helm" \
  -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=v4.3.2 -X helm.sh/helm/v4/internal/version.gitTreeState=clean" \
  helm.sh/helm/v4/cmd/helm)
ln -s argocd "$tmp/argocd-repo-server"
ln -s argocd "$tmp/argocd-application-controller"
# The CRDs of exactly this version, from the module cache the build just used.
src=$(cd "$mod" && go list -m -f '{{.Dir}}' "$pkg")
cp "$src/manifests/crds/application-crd.yaml" "$src/manifests/crds/appproject-crd.yaml" "$tmp/crds/"
cp "$src/LICENSE" "$tmp/crds/LICENSE"
# The repo-server runs git-verify-wrapper.sh for every manifest generation, GPG or not
# (reposerver/repository/repository.go L556, util/git/client.go VerifyCommitSignature:
# without it every generation fails "permission denied").
cp "$src/hack/git-verify-wrapper.sh" "$src/hack/gpg-wrapper.sh" "$tmp/"
chmod -R u+w "$tmp/crds" "$tmp"/*.sh
chmod +x "$tmp"/*.sh
rm -rf "$out" && mv "$tmp" "$out"
log "built Argo CD in $((SECONDS - start))s"
echo "$out"
