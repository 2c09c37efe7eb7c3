# MetaStore container image, laid out like etcd's: the server and the stock
# etcdctl (3.6.16, pinned in tools/), running as a non-root user.
#
#   docker build -t metastore .
#   docker run -p 2379:2379 -v metastore-data:/var/lib/metastore metastore
#   docker exec <container> etcdctl put foo bar
#
# The build stage compiles bin/metastore with cgo against Debian's RocksDB,
# and etcdctl from tools/; the runtime stage carries only the shared
# libraries they link. examples/compose.yaml runs a 3-member cluster.

ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION}-bookworm AS build
RUN apt-get update \
	&& apt-get install -y --no-install-recommends \
		librocksdb-dev libsnappy-dev zlib1g-dev libbz2-dev liblz4-dev libzstd-dev \
	&& rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Dependencies first, so that source edits reuse the module download layers.
COPY go.mod go.sum ./
COPY tools/go.mod tools/go.sum ./tools/
RUN go mod download && go -C tools mod download
COPY . .
ENV GOTOOLCHAIN=local
RUN CGO_ENABLED=1 go build -trimpath -o /out/metastore ./cmd/metastore
RUN CGO_ENABLED=0 go -C tools build -trimpath -o /out/etcdctl go.etcd.io/etcd/etcdctl/v3

FROM debian:bookworm-slim
# A fixed numeric UID, so that orchestrators enforcing runAsNonRoot can
# check it, and volumes can be prepared for it (chown 10001).
RUN apt-get update \
	&& apt-get install -y --no-install-recommends librocksdb7.8 ca-certificates \
	&& rm -rf /var/lib/apt/lists/* \
	&& groupadd --system --gid 10001 metastore \
	&& useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/metastore --create-home metastore
COPY --from=build /out/metastore /out/etcdctl /usr/local/bin/
USER 10001:10001
VOLUME /var/lib/metastore
EXPOSE 2379 2380
# etcdctl in the container talks to the member by default, as in etcd's
# image; a TLS deployment sets ETCDCTL_CACERT/CERT/KEY and https here.
ENV ETCDCTL_ENDPOINTS=http://127.0.0.1:2379
# Healthy once the member answers a linearizable read through the cluster
# (etcd's `endpoint health`: it fails while there is no leader).
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
	CMD ["etcdctl", "--command-timeout=4s", "endpoint", "health"]
ENTRYPOINT ["/usr/local/bin/metastore"]
# A single member reachable from outside the container; override the whole
# command line to join or form a cluster.
CMD ["--name=default", \
	"--data-dir=/var/lib/metastore/default.metastore", \
	"--listen-client-urls=http://0.0.0.0:2379", \
	"--advertise-client-urls=http://127.0.0.1:2379", \
	"--listen-peer-urls=http://0.0.0.0:2380", \
	"--initial-advertise-peer-urls=http://127.0.0.1:2380", \
	"--initial-cluster=default=http://127.0.0.1:2380"]
