# Cairn's container image: one node, `cairn server`.
#
#   docker build --build-arg COMMIT=$(git rev-parse HEAD) -t cairn .    (or: make image)
#   docker run -d --name cairn -p 8080:8080 -v cairn-data:/var/lib/cairn cairn
#
# README.md ("Running in a container") and docs/operations.md ("Running in
# a container") show a mount through /dev/fuse and a cluster.
#
# Two stages:
#  1. build: the official Go image builds the static binary as `make
#     build` does (CGO_ENABLED=0, -trimpath, the commit stamped in: the
#     build context has no .git, so it comes as the COMMIT argument).
#  2. runtime: debian:bookworm-slim with ca-certificates, curl and fuse3,
#     not distroless/static. The node mounts buckets with mount(2) itself
#     (go-fuse's direct mount, given --cap-add SYS_ADMIN and --device
#     /dev/fuse), so no fusermount3 is needed for that, and distroless
#     would do for a node that only serves HTTP. What the ~80 MB buy: curl
#     for the HEALTHCHECK (distroless has no shell nor client to call
#     /_cairn/health with), ca-certificates for a join to an https:// URL
#     signed by a public CA, fuse3's fusermount3 -u to clear by hand a
#     mount that a killed container left on a shared host directory, and a
#     shell for `docker exec`.
# The node runs as root in the container: mount(2) needs CAP_SYS_ADMIN in
# the process itself, which Docker grants to root only (a node without
# mounts may run with --user 65534 and a volume it can write).

ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG COMMIT=unknown
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-X github.com/cairn-fs/cairn/internal/version.commit=${COMMIT}" \
      -o /out/cairn ./cmd/cairn \
 && /out/cairn version

FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates curl fuse3 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/cairn /usr/bin/cairn
# Settings as environment variables (every CAIRN_* of `cairn server
# --help`), or a TOML file: -v ./cairn.toml:/etc/cairn/cairn.toml -e
# CAIRN_CONFIG=/etc/cairn/cairn.toml.
ENV CAIRN_DATA=/var/lib/cairn \
    CAIRN_LISTEN=0.0.0.0:8080
VOLUME /var/lib/cairn
# HTTP (API, S3, WebDAV, admin page), and the gossip port of a cluster
# node (the listen port + 100, UDP and TCP).
EXPOSE 8080 8180 8180/udp
# SIGTERM: the node unmounts, finishes requests (10 s) and closes its
# stores; give it that time: docker stop -t 60.
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=30s --timeout=5s --start-period=2m \
  CMD curl -fsS http://127.0.0.1:8080/_cairn/health || exit 1
ENTRYPOINT ["/usr/bin/cairn", "server"]
