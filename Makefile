# Cairn build, run and test entry points. See README.md.
SHELL := /bin/bash
GO ?= go
export CGO_ENABLED ?= 0
GOFLAGS_BUILD := -trimpath -ldflags "-X github.com/cairn-fs/cairn/internal/version.commit=$(shell git rev-parse HEAD 2>/dev/null) -X github.com/cairn-fs/cairn/internal/version.dirty=$(shell test -n "$$(git status --porcelain 2>/dev/null)" && echo true)"

.PHONY: all build run test test-unit test-race test-e2e test-s3 s3-clients fuse3 dav-tools ui-tools ui-screenshots bench soak vet clean package pkg-tools image image-test

all: build

build:
	$(GO) build $(GOFLAGS_BUILD) -o bin/cairn ./cmd/cairn

# The embedded default: a local 3-node cluster with data under ./data.
run: build
	bin/cairn dev --data ./data

vet:
	$(GO) vet ./...
	cd packaging && $(GO) vet ./...

# Unit, package and end-to-end tests (the e2e test runs the real binary),
# then the race detector over the concurrent packages.
test: build vet fuse3 dav-tools ui-tools pkg-tools
	$(GO) test -count=1 -timeout 16m ./...
	cd packaging && $(GO) test -count=1 ./...
	@$(MAKE) --no-print-directory test-s3
	@$(MAKE) --no-print-directory test-race

# The WebDAV tests (test/e2e/webdav_test.go) run Debian's litmus and
# davfs2, the resume test (test/e2e/resume_test.go) curl and wget, the PHP
# sessions test (test/e2e/phpsession_test.go) php-fpm; as root
# with apt-get they are installed when missing.
dav-tools:
	@missing=""; command -v litmus >/dev/null 2>&1 || missing="$$missing litmus"; \
	command -v curl >/dev/null 2>&1 || missing="$$missing curl"; \
	command -v wget >/dev/null 2>&1 || missing="$$missing wget"; \
	command -v mount.davfs >/dev/null 2>&1 || [ -x /usr/sbin/mount.davfs ] || missing="$$missing davfs2"; \
	ls /usr/sbin/php-fpm* >/dev/null 2>&1 || missing="$$missing php-fpm"; \
	if [ -n "$$missing" ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "make: installing$$missing with apt-get for the e2e tests"; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y -q $$missing >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q $$missing >/dev/null; } \
			|| echo "make: apt-get install$$missing failed: the WebDAV tests will fail or skip"; \
	fi

# The admin page test (test/e2e/ui_test.go) drives Debian's Chromium with
# playwright-core, pinned in test/ui/package.json and package-lock.json and
# installed with npm ci into test/ui/node_modules (git-ignored). As root
# with apt-get, chromium is installed when missing. Without a browser the
# test skips with a message, except under CI=true, where it fails.
CHROMIUM ?= /usr/bin/chromium
ui-tools:
	@if [ ! -x "$(CHROMIUM)" ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "make: installing chromium with apt-get for the admin page test"; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y -q chromium >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; } \
			|| echo "make: apt-get install chromium failed: the admin page test will fail (CI=true) or skip"; \
	fi
	@if ! command -v npm >/dev/null 2>&1; then \
		echo "make: no npm: the admin page test will fail (CI=true) or skip"; \
	elif ! cmp -s test/ui/package-lock.json test/ui/node_modules/.cairn-lock; then \
		echo "make: installing the pinned playwright-core in test/ui/node_modules (npm ci)"; \
		(cd test/ui && npm ci --no-audit --no-fund --loglevel=error) && cp test/ui/package-lock.json test/ui/node_modules/.cairn-lock; \
	fi

# The screenshots in docs/admin-ui.md, taken by the admin page test on a
# 3-node cluster with traffic (about a minute).
ui-screenshots: build ui-tools
	CAIRN_UI_SCREENSHOTS="$(abspath docs)" $(GO) test -count=1 -timeout 5m -run 'TestUI$$' ./test/e2e

# Real S3 clients (boto3, the aws CLI, rclone, s3cmd) against a 3-node
# cluster of bin/cairn (test/s3). The Python clients are pinned in
# test/s3/requirements.txt and installed in $(S3_VENV); rclone, s3cmd and
# openssl (a test certificate for the HTTPS test) come from Debian
# (installed with apt-get as root when missing).
S3_VENV ?= .venv-s3
PYTHON ?= python3
test-s3: build s3-clients
	PATH="$(abspath $(S3_VENV))/bin:$$PATH" CAIRN_BIN="$(abspath bin/cairn)" \
		"$(S3_VENV)/bin/python" -m pytest -q -p no:cacheprovider test/s3

s3-clients:
	@missing=""; for c in rclone s3cmd openssl; do command -v $$c >/dev/null 2>&1 || missing="$$missing $$c"; done; \
	if [ -n "$$missing" ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "make: installing$$missing with apt-get for the S3 client tests"; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y -q $$missing >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q $$missing >/dev/null; } \
			|| echo "make: apt-get install$$missing failed: those S3 client tests will fail"; \
	fi
	@if [ ! -x "$(S3_VENV)/bin/python" ]; then \
		$(PYTHON) -m venv "$(S3_VENV)" 2>/dev/null || { \
			if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
				export DEBIAN_FRONTEND=noninteractive; \
				apt-get install -y -q python3-venv >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q python3-venv >/dev/null; }; \
			fi; rm -rf "$(S3_VENV)"; $(PYTHON) -m venv "$(S3_VENV)"; }; \
	fi
	@if ! cmp -s test/s3/requirements.txt "$(S3_VENV)/.requirements"; then \
		echo "make: installing the pinned S3 clients in $(S3_VENV)"; \
		"$(S3_VENV)/bin/pip" install -q --disable-pip-version-check -r test/s3/requirements.txt && \
			cp test/s3/requirements.txt "$(S3_VENV)/.requirements"; \
	fi

# The mount tests need FUSE's mount helper (Debian: fuse3). As root with
# apt-get (CI on Debian) it is installed when missing; otherwise those
# tests skip with a message.
fuse3:
	@if ! command -v fusermount3 >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "make: installing fuse3 (FUSE mount helper) with apt-get for the mount tests"; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y -q fuse3 >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q fuse3 >/dev/null; } \
			|| echo "make: apt-get install fuse3 failed: the mount tests will skip"; \
	fi

# The race detector needs cgo, so a C compiler (RACE_CC, default gcc; or
# e.g. RACE_CC=clang). When there is none and we run as root with apt-get
# (CI on Debian), gcc is installed; otherwise the race step is skipped with
# a message, not failed.
RACE_CC ?= gcc
RACE_PKGS ?= ./internal/store/... ./internal/frontend/fuse/... ./internal/frontend/s3/... ./internal/frontend/webdav/... ./internal/access/... ./internal/blob/... ./internal/consensus/... ./internal/replica/... ./internal/transport/... ./internal/sim/... ./internal/clock/... ./internal/backup/...
test-race:
	@if ! command -v $(RACE_CC) >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "make: no C compiler ($(RACE_CC)) for the race detector: installing gcc with apt-get"; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y -q gcc >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q gcc >/dev/null; } \
			|| echo "make: apt-get install gcc failed"; \
	fi
	@if command -v $(RACE_CC) >/dev/null 2>&1; then \
		echo "CGO_ENABLED=1 CC=$(RACE_CC) $(GO) test -count=1 -short -race -timeout 8m $(RACE_PKGS)"; \
		CGO_ENABLED=1 CC=$(RACE_CC) $(GO) test -count=1 -short -race -timeout 8m $(RACE_PKGS); \
	else \
		echo "make: SKIPPED the race tests: they need a C compiler ($(RACE_CC)) and none is installed;"; \
		echo "make: install one (Debian: apt-get install gcc) and run 'make test-race'."; \
	fi

# Benchmarks against nginx on the same files (installs wrk and nginx), and
# the mount against a local ext4 directory (as root; installs siege, nginx,
# php-fpm, MariaDB, WordPress and linux-source); then a tree grown to a
# million files (bench/scale.sh; STAGES="100000 1000000 10000000" for ten
# million, about 50 GB of disk) and the namespace's apply ceiling.
bench: build
	bash bench/read.sh
	bash bench/ingest.sh
	bash bench/cluster.sh
	bash bench/mount.sh
	bash bench/download.sh
	bash bench/scale.sh
	go run ./bench/apply

# Longer randomized and crash runs: internal/sim runs SOAK_SEEDS seeds
# (1000, 1001, ...) beyond the 40 of make test, about 2 s each on 2 cores,
# and shows it finds the old orphan-sweep race (TestSimCatchesLocalOrphanSweep);
# then the container image's build and run (make image-test).
SOAK_SEEDS ?= 2000
SOAK_TIMEOUT ?= 180m
soak: build
	CAIRN_SOAK=1 CAIRN_SOAK_SEEDS=$(SOAK_SEEDS) $(GO) test -count=1 -timeout $(SOAK_TIMEOUT) ./...
	@$(MAKE) --no-print-directory image-test

# Packages (docs/operations.md, "Packages and the systemd unit"): a .deb
# and an .rpm of a static linux/$(PKG_ARCH) build, made with nfpm by
# packaging/cmd/mkpkg (its own module: nfpm stays out of go.mod), into
# $(DIST). The completions and man pages come from bin/cairn, which must
# run here.
PKG_ARCH ?= $(shell $(GO) env GOARCH)
DIST ?= dist
package: build
	CGO_ENABLED=0 GOOS=linux GOARCH=$(PKG_ARCH) $(GO) build $(GOFLAGS_BUILD) -o $(DIST)/cairn-linux-$(PKG_ARCH) ./cmd/cairn
	cd packaging && CGO_ENABLED=0 $(GO) run ./cmd/mkpkg -bin "$(abspath $(DIST))/cairn-linux-$(PKG_ARCH)" \
		-gen "$(abspath bin/cairn)" -arch $(PKG_ARCH) -out "$(abspath $(DIST))"

# The package test (test/e2e/package_test.go) boots a Debian root under
# systemd-nspawn (systemd-container), made once with debootstrap and kept
# in ~/.cache/cairn-test, and reads the .rpm with rpm. As root with
# apt-get they are installed when missing.
pkg-tools:
	@missing=""; command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] || missing="$$missing debootstrap"; \
	command -v systemd-nspawn >/dev/null 2>&1 || missing="$$missing systemd-container"; \
	command -v rpm >/dev/null 2>&1 || missing="$$missing rpm"; \
	if [ -n "$$missing" ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "make: installing$$missing with apt-get for the package test"; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y -q $$missing >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q $$missing >/dev/null; } \
			|| echo "make: apt-get install$$missing failed: the package test will fail (CI=true) or skip"; \
	fi

# The container image (Dockerfile) with docker or podman (DOCKER=podman).
DOCKER ?= docker
IMAGE ?= cairn:dev
image:
	$(DOCKER) build --build-arg COMMIT=$$(git rev-parse HEAD) -t $(IMAGE) .

# The image built with buildah (no daemon) and run under systemd-nspawn as
# docker run would, with a mount (test/e2e/image_test.go, 3-4
# minutes; part of make soak, not of make test). As root with apt-get,
# buildah and systemd-container are installed when missing.
image-test: build pkg-tools
	@if ! command -v buildah >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "make: installing buildah with apt-get for the image test"; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y -q buildah >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q buildah >/dev/null; } \
			|| echo "make: apt-get install buildah failed: the image test will fail"; \
	fi
	CAIRN_IMAGE_TEST=1 $(GO) test -count=1 -timeout 20m -run 'TestImage$$' -v ./test/e2e

clean:
	rm -rf bin $(DIST) $(S3_VENV) test/ui/node_modules
