# MetaStore: build, run, test and benchmark. `make help` lists the targets.
#
# Everything a fresh Debian/Ubuntu machine needs is installed on demand:
# `make run` and `make test` call `make deps` (system packages via apt-get)
# and build what they use, the reference etcd binaries included.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

GO ?= go

BIN_DIR   := bin
METASTORE := $(BIN_DIR)/metastore
# Reference etcd 3.6 binaries, pinned by the separate module in tools/.
REF_DIR      := $(BIN_DIR)/ref
REF_BINARIES := $(REF_DIR)/etcd $(REF_DIR)/etcdctl $(REF_DIR)/etcdutl $(REF_DIR)/benchmark $(REF_DIR)/etcd-3.5
TOOLS_MOD    := tools/go.mod tools/go.sum

STATICCHECK_VERSION := v0.8.2
STATICCHECK         := $(BIN_DIR)/tools/staticcheck-$(STATICCHECK_VERSION)/staticcheck

# `make run`: one member on the standard etcd ports.
RUN_DATA_DIR := data/default.metastore
RUN_FLAGS    ?=

TEST_TIMEOUT := 20m
# Binary under test for the end-to-end suite: metastore or etcd.
E2E_TARGET ?= metastore

.PHONY: help deps build build-faults tools run test test-unit test-e2e test-e2e-rocksdb test-e2e-etcd test-etcd-suites test-etcd-suites-short test-linearizability-long test-faults-long test-coordination-long test-linearizability-rocksdb test-overload-long fuzz bench bench-table bench-cluster lint clean

help:
	@echo "make deps           install missing system packages (apt-get; Debian/Ubuntu)"
	@echo "make build          build $(METASTORE)"
	@echo "make build-faults   build $(BIN_DIR)/metastore-faults (with the disk-fault seam, for test/faults)"
	@echo "make tools          build the reference etcd, etcdctl, etcdutl and benchmark (and etcd 3.5) into $(REF_DIR)/"
	@echo "make run            deps + build, then run one member on 127.0.0.1:2379 (data in $(RUN_DATA_DIR))"
	@echo "make test           deps + build + tools, then unit tests (-race), the e2e suite and a subset of etcd's own suites"
	@echo "make test-unit      unit tests with -race (everything but ./test/...)"
	@echo "make test-e2e       e2e suite against E2E_TARGET (default metastore)"
	@echo "make test-e2e-etcd  e2e suite against the reference etcd (validates the tests)"
	@echo "make test-etcd-suites  etcd's own tests/common and tests/e2e (ctl, misc) against bin/metastore"
	@echo "                    (ETCD_SUITES_TARGET=etcd: against the reference etcd; ETCD_SUITES=common|e2e-ctl|e2e-misc)"
	@echo "make test-linearizability-long  10-minute linearizability and watch check under kill/pause/partition faults"
	@echo "                    (LIN_ENGINE=rocksdb for the RocksDB engine)"
	@echo "make test-faults-long  one fault for DURATION (default 10m) on ENGINE (memory|rocksdb): FAULT=kill|pause|isolate|"
	@echo "                    membership|tornwal|truncsnap|lostdata|diskfull|slowdisk|diskerror|all"
	@echo "                    (linearizability + watch check; slowdisk, diskerror run bin/metastore-faults)"
	@echo "                    or clock (lease timing under leader clock steps)"
	@echo "make test-coordination-long  the lock fault suite (test/coordination) cycling its faults for DURATION"
	@echo "                    (default 10m) on ENGINE (memory|rocksdb); ends with a summary line"
	@echo "make test-overload-long  the overload tests at their long sizes (LIN_ENGINE=rocksdb for RocksDB)"
	@echo "make fuzz           every Go fuzz target for FUZZTIME each (default 30s)"
	@echo "make bench          Go benchmarks of ./internal/..., the side benchmarks (coordination, HTTP locks,"
	@echo "                    lease expiry, watcher memory, migration), then bench/table.sh: the full"
	@echo "                    MetaStore vs etcd table in bench/out/table.md (BENCH_SCALE=small: quick run)"
	@echo "make bench-table    bench/table.sh only (1 and 3 members, both engines, footprint, scale run)"
	@echo "make bench-cluster  bench/cluster.sh: 3-member MetaStore vs 3-member etcd"
	@echo "make lint           go vet and staticcheck $(STATICCHECK_VERSION)"
	@echo "make clean          remove $(BIN_DIR)/ and data/"

deps:
	@scripts/install-deps.sh

build:
	$(GO) build -o $(METASTORE) ./cmd/metastore

# MetaStore with the disk-fault seam (internal/faults/diskfault), for test/faults.
build-faults:
	$(GO) build -tags faultinject -o $(BIN_DIR)/metastore-faults ./cmd/metastore

tools: $(REF_BINARIES)

# go build leaves an up-to-date output untouched, so touch it to keep make
# from rebuilding on every run once tools/go.mod is newer than the binary.
$(REF_DIR)/etcd: $(TOOLS_MOD)
	cd tools && $(GO) build -o ../$@ go.etcd.io/etcd/server/v3
	@touch $@

$(REF_DIR)/etcdctl: $(TOOLS_MOD)
	cd tools && $(GO) build -o ../$@ go.etcd.io/etcd/etcdctl/v3
	@touch $@

$(REF_DIR)/etcdutl: $(TOOLS_MOD)
	cd tools && $(GO) build -o ../$@ go.etcd.io/etcd/etcdutl/v3
	@touch $@

# etcd 3.5, for the snapshot files of a 3.5 cluster (its own module).
$(REF_DIR)/etcd-3.5: tools/etcd35/go.mod tools/etcd35/go.sum
	cd tools/etcd35 && $(GO) build -o ../../$@ go.etcd.io/etcd/server/v3
	@touch $@

$(REF_DIR)/benchmark: $(TOOLS_MOD)
	cd tools && $(GO) build -o ../$@ go.etcd.io/etcd/v3/tools/benchmark
	@touch $@

run: deps build
	@mkdir -p $(dir $(RUN_DATA_DIR))
	./$(METASTORE) --name=default --data-dir=$(RUN_DATA_DIR) \
		--listen-client-urls=http://127.0.0.1:2379 --advertise-client-urls=http://127.0.0.1:2379 \
		--listen-peer-urls=http://127.0.0.1:2380 --initial-advertise-peer-urls=http://127.0.0.1:2380 \
		--initial-cluster=default=http://127.0.0.1:2380 $(RUN_FLAGS)

test: deps build build-faults tools
	@$(MAKE) --no-print-directory test-unit
	@$(MAKE) --no-print-directory test-e2e
	@$(MAKE) --no-print-directory test-e2e-rocksdb
	@$(MAKE) --no-print-directory test-linearizability-rocksdb
	@$(MAKE) --no-print-directory test-etcd-suites-short

test-unit:
	pkgs="$$($(GO) list ./... | { grep -v '/test/' || true; })"; \
	if [[ -z "$$pkgs" ]]; then echo "no unit test packages"; exit 0; fi; \
	$(GO) test -race -timeout $(TEST_TIMEOUT) $$pkgs

# -count=1: the go test cache does not know the server binary changed.
test-e2e:
	E2E_TARGET=$(E2E_TARGET) $(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./test/...

# The KV, watch, lease and cluster suite, the fault tests and the lock
# fault suite again on the RocksDB engine.
test-e2e-rocksdb:
	E2E_TARGET=metastore E2E_EXTRA_FLAGS=--storage-engine=rocksdb $(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./test/e2e/ ./test/faults/ ./test/coordination/

test-e2e-etcd: tools
	E2E_TARGET=etcd $(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./test/...

# etcd's own suites (go.etcd.io/etcd/tests/v3 at the reference binaries'
# version, tools/etcdtests) against bin/metastore, or against the
# reference etcd with ETCD_SUITES_TARGET=etcd; scripts/etcd-suites.sh says
# how, test/etcdsuites/known-failures.txt what fails and why. Each suite
# prints its leaf counts; an unlisted failure fails the target.
ETCD_SUITES ?= common e2e-ctl e2e-misc
test-etcd-suites: build tools
	scripts/etcd-suites.sh $(ETCD_SUITES)

# The subset make test runs (scripts/etcd-suites.sh -short).
test-etcd-suites-short: build tools
	cd tools/etcdtests && $(GO) test -count=1 ./summarize
	scripts/etcd-suites.sh -short -timeout 10m common e2e-ctl e2e-misc

# make test runs the linearizability and watch check under all its faults
# (test/linearizability/doc.go; the disk faults included, diskfull only as
# root) for 60 s on the memory engine (part of ./test/...) and for 30 s on
# RocksDB, and the seam faults (slowdisk, diskerror: bin/metastore-faults)
# for 20 s on each; this runs the first for 10 minutes, against
# E2E_TARGET, on LIN_ENGINE (memory or rocksdb).
LIN_DURATION ?= 10m
LIN_ENGINE ?= memory
LIN_FLAGS = $(if $(filter rocksdb,$(LIN_ENGINE)),--storage-engine=rocksdb,)
test-linearizability-long: build tools
	E2E_TARGET=$(E2E_TARGET) E2E_EXTRA_FLAGS=$(LIN_FLAGS) $(GO) test -count=1 -timeout 30m -run 'TestLinearizability$$' -v ./test/linearizability/ -args -lin.duration=$(LIN_DURATION)

# One fault at a time for DURATION on ENGINE, against E2E_TARGET: the
# nemesis faults (kill, pause, isolate, membership, the disk faults tornwal,
# truncsnap, lostdata and diskfull (root only: tmpfs data dirs), or all of
# them; or slowdisk or diskerror, through the disk-fault seam of
# bin/metastore-faults, left out against etcd) under the linearizability
# and watch check, or clock: the lease timing bound
# while the leader's clock is stepped (test/faults/clock_test.go, with
# bin/metastore-faults; unstepped against etcd). The last line printed is
# the run's summary: operations, faults injected and the verdict.
FAULT ?= all
ENGINE ?= memory
DURATION ?= 10m
ENGINE_FLAGS = $(if $(filter rocksdb,$(ENGINE)),--storage-engine=rocksdb,)
FAULTS_LONG_LOG = $(CURDIR)/test-faults-long-$(FAULT)-$(ENGINE).log
test-faults-long: build build-faults tools
	@echo "log: $(FAULTS_LONG_LOG)"
	rc=0; if [[ "$(FAULT)" == clock ]]; then \
	  E2E_TARGET=$(E2E_TARGET) E2E_EXTRA_FLAGS=$(ENGINE_FLAGS) $(GO) test -count=1 -timeout 60m -run 'TestLeaderClockJumps$$' -v ./test/faults/ -args -clock.duration=$(DURATION) > $(FAULTS_LONG_LOG) 2>&1 || rc=$$?; \
	else \
	  E2E_TARGET=$(E2E_TARGET) E2E_EXTRA_FLAGS=$(ENGINE_FLAGS) $(GO) test -count=1 -timeout 60m -run 'TestLinearizability$$' -v ./test/linearizability/ -args -lin.duration=$(DURATION) -lin.faults=$(FAULT) > $(FAULTS_LONG_LOG) 2>&1 || rc=$$?; \
	fi; \
	grep -h -- '--- \|summary:' $(FAULTS_LONG_LOG) || true; exit $$rc

# make test runs the lock fault suite (test/coordination: HTTP lock
# service and SDK locks under member and leader freezes, a cut peer link,
# kills, quorum loss, a vanished client host and a holder that stops
# reading) with each fault once on both engines; this cycles
# the faults for DURATION on ENGINE. The log goes to
# test-coordination-long-ENGINE.log; the last line printed is the summary:
# operations, grants, faults injected, min gap, max request time, verdict.
COORD_LONG_LOG = $(CURDIR)/test-coordination-long-$(ENGINE).log
test-coordination-long: build
	@echo "log: $(COORD_LONG_LOG)"
	rc=0; E2E_TARGET=$(E2E_TARGET) E2E_EXTRA_FLAGS=$(ENGINE_FLAGS) $(GO) test -count=1 -timeout 60m -run 'TestCoordination$$' -v ./test/coordination/ -args -coord.duration=$(DURATION) > $(COORD_LONG_LOG) 2>&1 || rc=$$?; \
	grep -E -- '^ *--- (PASS|FAIL|SKIP)' $(COORD_LONG_LOG) || true; grep -h -- 'summary:' $(COORD_LONG_LOG) || true; exit $$rc

# make test runs the overload tests (test/faults/overload_test.go) at their
# short sizes; this runs them at the long ones (100,000 never-read watchers,
# 5,000 connections, 30 s floods, a 2.1 GiB range: etcd needs some 12 GiB of
# RAM for that one) against E2E_TARGET, on LIN_ENGINE.
test-overload-long: build tools
	E2E_TARGET=$(E2E_TARGET) E2E_EXTRA_FLAGS=$(LIN_FLAGS) $(GO) test -count=1 -timeout 30m -run TestOverload -v ./test/faults/ -args -overload.scale=long

test-linearizability-rocksdb:
	E2E_TARGET=metastore E2E_EXTRA_FLAGS=--storage-engine=rocksdb $(GO) test -count=1 -timeout 10m -run TestLinearizability ./test/linearizability/ -args -lin.duration=30s

FUZZTIME ?= 30s
fuzz: build
	FUZZTIME=$(FUZZTIME) scripts/fuzz.sh

# BENCH_SCALE=small (make bench BENCH_SCALE=small) runs every benchmark at
# small sizes: minutes instead of hours, to check the scripts, not to
# quote. The table comes last so that it is what the run ends with.
BENCH_SCALE ?=
export BENCH_SCALE
BENCH_GO_FLAGS = $(if $(filter small,$(BENCH_SCALE)),-benchtime=10x,)
bench: build tools
	$(GO) test -run '^$$' -bench . $(BENCH_GO_FLAGS) ./internal/...
	bench/coordination.sh
	bench/httplock.sh
	bench/leaseexpiry.sh
	bench/watchmem.sh
	bench/migrate.sh
	bench/table.sh

bench-table: build tools
	bench/table.sh

bench-cluster: build tools
	bench/cluster.sh

$(STATICCHECK):
	GOBIN=$(CURDIR)/$(dir $@) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

lint: $(STATICCHECK)
	$(GO) vet ./...
	$(STATICCHECK) ./...

clean:
	rm -rf $(BIN_DIR) data
