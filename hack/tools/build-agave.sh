#!/usr/bin/env bash
# Builds the pinned Agave release from its published crates into a cache outside the
# clone, once per version, for the lab's real-Agave runtime (make test-real):
#   agave-validator, solana-test-validator  (crate agave-validator)
#   solana-genesis, solana-keygen, solana   (crates solana-genesis, solana-keygen, solana-cli)
#
#   hack/tools/build-agave.sh                 build what is missing, print the bin dir
#   hack/tools/build-agave.sh --print-bin-dir print the bin dir without building
#   hack/tools/build-agave.sh --check         exit 1 unless every binary is built
#
# The build is long (about 960 crates, a 2.5 GiB target folder; 78 minutes at the lowest
# priority on a busy 2-core machine) and needs Debian's clang, libclang-dev,
# protobuf-compiler and libudev-dev. It runs at nice 19 so it can go on in the background.
# VALTUNE_CACHE overrides the cache root (default ~/.cache/valtune);
# AGAVE_VERSION the version (default the one the lab's real-Agave tests pin).
set -euo pipefail

cache=${VALTUNE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/valtune}
version=${AGAVE_VERSION:-4.0.0}
root="$cache/agave/$version"
bin_dir="$root/bin"
bins=(agave-validator solana-test-validator solana-genesis solana-keygen solana)
# crate -> the binaries it installs (cargo install installs every bin of a crate).
crates=(agave-validator solana-genesis solana-keygen solana-cli)

log() { printf '[agave] %s\n' "$*" >&2; }

all_built() {
  local b
  for b in "${bins[@]}"; do [ -x "$bin_dir/$b" ] || return 1; done
}

case "${1:-}" in
  --print-bin-dir) echo "$bin_dir"; exit 0 ;;
  --check) all_built; exit $? ;;
  "") ;;
  *) echo "usage: $0 [--print-bin-dir|--check]" >&2; exit 2 ;;
esac

if all_built; then echo "$bin_dir"; exit 0; fi

missing=()
command -v clang >/dev/null || missing+=(clang)
[ -n "$(ls /usr/lib/llvm-*/lib/libclang.so* 2>/dev/null | head -n1)" ] || missing+=(libclang-dev)
command -v protoc >/dev/null || missing+=(protobuf-compiler)
{ [ -e /usr/include/libudev.h ] || pkg-config --exists libudev 2>/dev/null; } || missing+=(libudev-dev)
if [ ${#missing[@]} -gt 0 ]; then
  echo "the Agave build needs Debian packages that are missing: ${missing[*]}" >&2
  echo "install them with: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi

mkdir -p "$root"
# Two clones (or CI beside a session) may build at once: one builds, the other waits.
exec 9>"$root/.lock"
flock 9
if all_built; then echo "$bin_dir"; exit 0; fi

start=$SECONDS
# One target folder for the four crates: their lock files pin the same release, so most
# of the dependency graph is compiled once.
export CARGO_TARGET_DIR="$root/target"
for c in "${crates[@]}"; do
  log "building $c $version (first build of this version; about an hour or more on 2 cores)"
  nice -n 19 cargo install "$c@$version" --locked --root "$root" --force
  log "$c built; $((SECONDS - start))s so far"
done
all_built || { echo "the build finished but binaries are missing from $bin_dir" >&2; exit 1; }
log "built Agave $version in $((SECONDS - start))s"
# The target folder is only a build cache; it is 2.5 GiB and not needed to run.
rm -rf "$CARGO_TARGET_DIR"
echo "$bin_dir"
