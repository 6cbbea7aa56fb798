# valtune's operator image, for those who build with Docker (`docker build -t
# ghcr.io/valtune/valtune:0.1.0 .`). `make image` builds the same image without Docker
# (hack/image.sh): one static binary, CA roots, an unprivileged user.
FROM rust:1.95-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends musl-tools \
    && rm -rf /var/lib/apt/lists/* \
    && rustup target add x86_64-unknown-linux-musl
WORKDIR /src
COPY . .
RUN cargo build --release --locked --target x86_64-unknown-linux-musl -p valtune --bin valtune

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /src/target/x86_64-unknown-linux-musl/release/valtune /usr/local/bin/valtune
LABEL org.opencontainers.image.title=valtune \
      org.opencontainers.image.source=https://github.com/valtune/valtune \
      org.opencontainers.image.licenses=Apache-2.0
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/valtune"]
CMD ["operator"]
