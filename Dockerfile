# MetaStore container image.
#
#   docker build -t metastore .
#   docker run -p 2379:2379 -v metastore-data:/var/lib/metastore metastore
#
# The build stage compiles bin/metastore with cgo against Debian's RocksDB;
# the runtime stage carries only the shared libraries it links.

ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION}-bookworm AS build
RUN apt-get update \
	&& apt-get install -y --no-install-recommends \
		librocksdb-dev libsnappy-dev zlib1g-dev libbz2-dev liblz4-dev libzstd-dev \
	&& rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Dependencies first, so that source edits reuse the module download layer.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=1 GOTOOLCHAIN=local go build -trimpath -o /out/metastore ./cmd/metastore

FROM debian:bookworm-slim
RUN apt-get update \
	&& apt-get install -y --no-install-recommends librocksdb7.8 ca-certificates \
	&& rm -rf /var/lib/apt/lists/* \
	&& useradd --system --home-dir /var/lib/metastore --create-home metastore
COPY --from=build /out/metastore /usr/local/bin/metastore
USER metastore
VOLUME /var/lib/metastore
EXPOSE 2379 2380
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
