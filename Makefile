# Cairn build, run and test entry points. See README.md.
SHELL := /bin/bash
GO ?= go
export CGO_ENABLED ?= 0
GOFLAGS_BUILD := -trimpath

.PHONY: all build run test test-unit test-race test-e2e bench soak vet clean

all: build

build:
	$(GO) build $(GOFLAGS_BUILD) -o bin/cairn ./cmd/cairn

# The embedded default: a local 3-node cluster with data under ./data.
run: build
	bin/cairn dev --data ./data

vet:
	$(GO) vet ./...

# Unit, package and end-to-end tests (the e2e test runs the real binary).
test: build vet
	$(GO) test -count=1 -timeout 12m ./...
	CGO_ENABLED=1 $(GO) test -count=1 -short -race -timeout 8m ./internal/store/... ./internal/blob/... ./internal/consensus/... ./internal/replica/... ./internal/transport/... ./internal/sim/... ./internal/clock/...

# Benchmarks against nginx on the same files (installs wrk and nginx).
bench: build
	bash bench/read.sh
	bash bench/ingest.sh
	bash bench/cluster.sh

# Longer randomized and crash runs.
soak: build
	CAIRN_SOAK=1 $(GO) test -count=1 -timeout 60m ./...

clean:
	rm -rf bin
