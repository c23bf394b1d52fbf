# The two commands (see README): `make run` and `make test`.
SHELL := /bin/bash
export GONOSUMDB := sigs.k8s.io/scheduler-library
GO ?= go
# Every build, vet and test compiles the packages as the image does (static,
# without build paths), so that they share one set of compiled packages: a
# cold `make test` compiles the tree once, not once more for the image test.
export CGO_ENABLED := 0
export GOFLAGS := $(strip $(shell $(GO) env GOFLAGS) -trimpath)
LISTEN ?= 127.0.0.1:8080
STATE := $(or $(SANDBOX_STATE),$(HOME)/.cache/quota-console-sandbox/state)

.PHONY: run test test-downloads agreement build generate check-generated vet govet unit sandbox-up sandbox-down test-sandbox-up test-sandbox-down e2e-deps bench load loadtest bench-history
.PHONY: image image-push helm promtool test-tools test-image test-image-deps manifests measure-wait

## run: start the demo sandbox (Kubernetes, Kueue, KWOK GPU nodes, Prometheus, demo teams and jobs) and the console
run: build
	bin/sandbox up --instance demo >/dev/null
	@echo "Console: http://$(LISTEN)   (Ctrl-C stops the console; 'make sandbox-down' stops the sandbox)"
	bin/console --kubeconfig $(STATE)/demo/kubeconfig --prometheus-url http://127.0.0.1:17111 --listen $(LISTEN)

# Test binaries are linked without symbol tables and DWARF: they are run,
# never debugged here, and linking about 25 of them is much of a cold run.
TESTFLAGS := -count=1 -ldflags=-s\ -w

## test: every test — unit, integration against the test sandbox, browser e2e
# go vet first, alone on the processors: it compiles what everything after it
# reuses (two go commands at once would each compile the same packages).
# Beside it only the downloads, which wait on the network. Then the tests,
# side by side (-parallel 4: the sandbox tests that wait on Kueue's cycles);
# more test binaries at once (-p 4) was slower cold: the compilations and
# the sandbox share two processors. staticcheck (three minutes of processor
# time cold) runs beside them at the lowest priority, on what the tests
# leave idle while they wait: at normal priority it made them two minutes
# longer, and beside the agreement suites it made Kueue twice as slow.
test: check-generated
	@$(MAKE) --no-print-directory --output-sync=target -j2 govet test-downloads
	@$(MAKE) --no-print-directory build test-sandbox-up test-tools
	@mkdir -p bin; nice -n 19 $(GO) tool staticcheck ./... >bin/staticcheck.log 2>&1 & check=$$!; \
	$(GO) test $(TESTFLAGS) -parallel 4 -timeout 15m ./...; tests=$$?; \
	wait $$check; checked=$$?; cat bin/staticcheck.log; \
	if [ $$checked -ne 0 ]; then echo "staticcheck failed (above)"; fi; \
	[ $$tests -eq 0 ] && [ $$checked -eq 0 ]
	$(MAKE) --no-print-directory agreement
	@if [ -n "$$CI" ]; then bin/sandbox down --instance test; fi

# What the tests download (Chromium, podman, promtool), one after another
# whatever -j runs this target: apt-get, which each uses, takes a lock.
test-downloads:
	@for t in e2e-deps test-image-deps promtool; do $(MAKE) --no-print-directory $$t || exit 1; done

## agreement: the previews against the real Kueue on the test sandbox, one suite at a time (make test runs it last)
# Each suite's cases wait on Kueue, not on the processors: 8 at once (more
# made the sandbox's apiserver and Kueue the bottleneck and every case slower).
agreement: test-sandbox-up
	AGREEMENT_SUITES=1 $(GO) test $(TESTFLAGS) -timeout 15m -p 1 -parallel 8 -run '^(TestImpactHarness|TestWhatIfAgreesWithKueue)$$' ./internal/kueue/impact/ ./internal/app/

build:
	$(GO) build -o bin/console ./cmd/console
	$(GO) build -o bin/sandbox ./cmd/sandbox

generate: manifests
	$(GO) tool templ generate

# deploy/rbac/*.yaml and deploy/manifests/quota-console.yaml are rendered from
# the Helm chart (deploy/helm/quota-console), the one source of the console's
# RBAC; TestGeneratedManifests fails when they differ from it.
manifests:
	$(GO) test -count=1 -run '^TestGeneratedManifests$$' ./deploy/helm -args -update

# Generated templ code is committed; fail when it is stale.
check-generated:
	@$(GO) tool templ generate >/dev/null 2>&1
	@git diff --exit-code --stat -- '*_templ.go' || { echo "templ output was stale: commit the regenerated files"; exit 1; }

vet: govet
	$(GO) tool staticcheck ./...

govet:
	$(GO) vet ./...

unit:
	SANDBOX_SKIP=1 $(GO) test -count=1 ./...

sandbox-up: build
	bin/sandbox up --instance demo

sandbox-down: build
	bin/sandbox down --instance demo

test-sandbox-up: build
	bin/sandbox up --instance test >/dev/null

test-sandbox-down: build
	bin/sandbox down --instance test

e2e-deps:
	bash e2e/setup.sh

# Benchmarks of the aggregation and page rendering at 200 teams x 50 000 Workloads.
bench:
	SANDBOX_SKIP=1 $(GO) test -run '^$$' -bench . -benchmem ./internal/...

# Task history at 1 000 000 tasks on SQLite and on the test sandbox's PostgreSQL:
# the 30-day statistics and preemption history (p50/p99), recording (events/s) and
# the store's size per million tasks. The filled stores are kept for later runs
# (SQLite under ~/.cache, PostgreSQL in the test sandbox); the first fill takes long.
bench-history: test-sandbox-up
	HISTORY_BENCH=1 HISTORY_BENCH_CACHE=$(HOME)/.cache/quota-console-sandbox $(GO) test -run '^$$' -bench BenchmarkHistory -benchtime 200x -timeout 120m -v ./internal/taskhistory/

# Fill the "load" sandbox with 200 teams and 50 000 Workloads, then run the
# console on it (port 8090) to measure memory and page latency at that size.
load: build
	$(GO) build -o bin/loadgen ./cmd/loadgen
	bin/sandbox up --instance load >/dev/null
	bin/loadgen --kubeconfig $(STATE)/load/kubeconfig
	@echo "Console on the loaded sandbox: http://127.0.0.1:8090"
	bin/console --kubeconfig $(STATE)/load/kubeconfig --prometheus-url http://127.0.0.1:17311 --listen 127.0.0.1:8090

# The container image, built offline without a container engine (tools/image):
# a static binary and the build machine's CA bundle (Debian's ca-certificates,
# for TLS to PostgreSQL and Prometheus) as the only files of one layer on an
# empty base. The same commit (and bundle) gives the same digest: every time in
# it is IMAGE_CREATED, the commit time (or $$SOURCE_DATE_EPOCH). Output in
# $(IMAGE_DIR): oci/ (OCI layout), quota-console.tar (OCI archive: podman load
# -i), digest.
IMAGE_DIR ?= bin/image
IMAGE_ARCH ?= $(shell $(GO) env GOARCH)
IMAGE_SOURCE ?= https://github.com/openquota/console
IMAGE_VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
IMAGE_REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
IMAGE_CREATED ?= $(or $(SOURCE_DATE_EPOCH),$(shell git log -1 --format=%ct 2>/dev/null || echo 0))
IMAGE_CA_BUNDLE ?= /etc/ssl/certs/ca-certificates.crt
VERSION_PKG := github.com/openquota/console/internal/version

image:
	@mkdir -p $(IMAGE_DIR)
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) $(GO) build -trimpath -buildvcs=false \
		-ldflags "-s -w -X $(VERSION_PKG).Version=$(IMAGE_VERSION) -X $(VERSION_PKG).Revision=$(IMAGE_REVISION)" \
		-o $(IMAGE_DIR)/quota-console ./cmd/console
	@tool=$$(tools/build.sh image) && $$tool build -binary $(IMAGE_DIR)/quota-console -ca-bundle $(IMAGE_CA_BUNDLE) -out $(IMAGE_DIR) \
		-version $(IMAGE_VERSION) -revision $(IMAGE_REVISION) -created $(IMAGE_CREATED) -source $(IMAGE_SOURCE) -arch $(IMAGE_ARCH)

## image-push REGISTRY=registry.example.com/team: push the image as $(REGISTRY)/quota-console:$(IMAGE_VERSION)
image-push:
	@test -n "$(REGISTRY)" || { echo "usage: make image-push REGISTRY=registry.example.com/team"; exit 2; }
	@$(MAKE) --no-print-directory image
	@tool=$$(tools/build.sh image) && $$tool push -layout $(IMAGE_DIR)/oci -to $(REGISTRY)/quota-console

# helm (helm.sh/helm/v3, tools/helm), built once into ~/.cache/quota-console-tools.
helm:
	@mkdir -p bin
	@ln -sf "$$(tools/build.sh helm)" bin/helm

# promtool (Debian's prometheus package, tools/promtool.sh), fetched once into
# ~/.cache/quota-console-tools: the chart's tests check and unit-test its alert
# rules with it (deploy/helm), and fail without it.
promtool:
	@mkdir -p bin
	@ln -sf "$$(tools/promtool.sh)" bin/promtool

# The tools modules' own tests (their go.mod keeps them out of ./...).
test-tools:
	cd tools/image && $(GO) vet ./... && $(GO) test -count=1 ./...

# podman and runc (Debian) for the image's podman test: about 20 s to install.
test-image-deps:
	bash tools/podman-setup.sh

# The image's tests alone: contents, --version, digest stability, podman.
test-image: test-image-deps test-sandbox-up test-tools
	$(GO) test -count=1 -v ./tools/imagetest/

# One bounded run on loopback (cmd/loadtest): fills or reuses the load sandbox,
# starts bin/console on it, and measures every page and CSV under 32 clients,
# 100 live-update watchers, CPU and memory, against the kubectl way; prints one
# table and writes bin/loadtest.json and .md. Quick run:
#   make loadtest LOADTEST_FLAGS="--workloads 2000"
LOADTEST_FLAGS ?=
loadtest: build
	$(GO) build -o bin/loadgen ./cmd/loadgen
	$(GO) build -o bin/loadtest ./cmd/loadtest
	bin/loadtest $(LOADTEST_FLAGS)

## measure-wait: the estimated waits against the waits that followed, on the demo sandbox (about 40 min; bin/waitcheck.md and .json)
# cmd/waitcheck: starts or reuses the demo sandbox, runs bin/console on it with
# a task history in a temporary SQLite file, keeps tasks waiting, reads the
# Tasks CSV every 30 s and compares each estimate with the admission that
# followed. Quick run: make measure-wait MEASURE_WAIT_FLAGS="--duration 20m --tail 3m"
MEASURE_WAIT_FLAGS ?=
measure-wait: build
	$(GO) build -o bin/waitcheck ./cmd/waitcheck
	bin/waitcheck $(MEASURE_WAIT_FLAGS)
