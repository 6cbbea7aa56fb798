#!/usr/bin/env bash
# `make image`: valtune's operator image without a Docker engine. A fully static binary
# (Rust's x86_64-unknown-linux-musl target; TLS is rustls, so no OpenSSL), one layer on
# an empty OCI base (crane append --oci-empty-base, go-containerregistry v0.22.1), its
# config set with crane mutate against crane's own in-memory registry on loopback (mutate
# only edits images in a registry), then written out as
#   target/image/oci/          an OCI image layout (index.json names the manifest)
#   target/image/valtune.tar   a tarball for `docker load` / `kind load image-archive`
# and its digest printed. The Dockerfile builds the same image with Docker.
#
#   IMAGE=ghcr.io/valtune/valtune  (the chart's image.repository); TAG=<crate version>
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${VALTUNE_TOOLS_BIN:?set VALTUNE_TOOLS_BIN (hack/tools/build.sh --print-bin-dir)}
target=x86_64-unknown-linux-musl
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' operator/Cargo.toml | head -n1)
image=${IMAGE:-ghcr.io/valtune/valtune}
tag=${TAG:-$version}
out=target/image
log() { printf '[image] %s\n' "$*" >&2; }

rustup target list --installed 2>/dev/null | grep -qx $target || {
  echo "the Rust target $target is missing: rustup target add $target" >&2
  exit 1
}
command -v musl-gcc >/dev/null || {
  echo "musl-gcc is missing (ring's C code needs it): apt-get install musl-tools" >&2
  exit 1
}
log "building valtune for $target (release)"
cargo build --release --locked --target $target -p valtune --bin valtune
binary=target/$target/release/valtune
if ! ldd "$binary" 2>&1 | grep -qE 'statically linked|not a dynamic executable'; then
  echo "$binary is dynamically linked; the image has no libc: $(ldd "$binary" 2>&1 | head -n3)" >&2
  exit 1
fi

rm -rf "$out" && mkdir -p "$out/rootfs/usr/local/bin" "$out/rootfs/etc/ssl/certs" "$out/rootfs/tmp"
install -m 0755 "$binary" "$out/rootfs/usr/local/bin/valtune"
# Symbols are a third of the binary and nothing in the image reads them.
if command -v strip >/dev/null; then strip "$out/rootfs/usr/local/bin/valtune"; fi
# The user the chart runs it as (runAsUser 65532), by name too.
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$out/rootfs/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$out/rootfs/etc/group"
# CA roots for a Prometheus behind https (this machine's Debian bundle).
cp /etc/ssl/certs/ca-certificates.crt "$out/rootfs/etc/ssl/certs/"
chmod 1777 "$out/rootfs/tmp"
# A reproducible layer: fixed order, owners and times.
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$out/rootfs" -cf "$out/layer.tar" .

# crane's registry, on loopback only, for as long as this script runs.
"$bin/crane" registry serve --address 127.0.0.1:0 2>"$out/registry.log" &
registry=$!
trap 'kill $registry 2>/dev/null || true' EXIT
for _ in $(seq 50); do
  port=$(sed -n 's/.*serving on port \([0-9]*\).*/\1/p' "$out/registry.log")
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "${port:-}" ] || { cat "$out/registry.log" >&2; exit 1; }
ref=127.0.0.1:$port/${image#*/}

"$bin/crane" append --oci-empty-base -f "$out/layer.tar" -t "$ref:base" >/dev/null 2>>"$out/crane.log"
"$bin/crane" mutate "$ref:base" -t "$ref:$tag" \
  --set-platform linux/amd64 \
  --entrypoint /usr/local/bin/valtune --cmd operator \
  --user 65532:65532 --workdir / \
  -l org.opencontainers.image.title=valtune \
  -l org.opencontainers.image.version="$version" \
  -l org.opencontainers.image.source=https://github.com/valtune/valtune \
  -l org.opencontainers.image.licenses=Apache-2.0 >/dev/null 2>>"$out/crane.log"
digest=$("$bin/crane" digest "$ref:$tag")
"$bin/crane" pull --format oci "$ref:$tag" "$out/oci" 2>>"$out/crane.log"
"$bin/crane" pull "$ref:$tag" "$out/valtune.tar" 2>>"$out/crane.log"
# crane's tarball names the image as it was pulled; tag it as users will see it.
"$bin/crane" config "$ref:$tag" >"$out/config.json"
rm -rf "$out/rootfs" "$out/layer.tar"

log "config: $(tr -d '\n' <"$out/config.json" | head -c 400)"
log "OCI layout: $out/oci   tarball: $out/valtune.tar ($(du -h "$out/valtune.tar" | cut -f1))"
echo "$image:$tag@$digest"
