# The two commands (see README): `make run` and `make test`.
SHELL := /bin/bash
export GONOSUMDB := sigs.k8s.io/scheduler-library
GO ?= go
LISTEN ?= 127.0.0.1:8080
STATE := $(or $(SANDBOX_STATE),$(HOME)/.cache/quota-console-sandbox/state)

.PHONY: run test build generate check-generated vet unit sandbox-up sandbox-down test-sandbox-up test-sandbox-down e2e-deps bench load bench-history

## run: start the demo sandbox (Kubernetes, Kueue, KWOK GPU nodes, Prometheus, demo teams and jobs) and the console
run: build
	bin/sandbox up --instance demo >/dev/null
	@echo "Console: http://$(LISTEN)   (Ctrl-C stops the console; 'make sandbox-down' stops the sandbox)"
	bin/console --kubeconfig $(STATE)/demo/kubeconfig --prometheus-url http://127.0.0.1:17111 --listen $(LISTEN)

## test: every test — unit, integration against the test sandbox, browser e2e
test: check-generated vet build e2e-deps test-sandbox-up
	$(GO) test -count=1 -timeout 15m ./...
	@if [ -n "$$CI" ]; then bin/sandbox down --instance test; fi

build:
	$(GO) build -o bin/console ./cmd/console
	$(GO) build -o bin/sandbox ./cmd/sandbox

generate:
	$(GO) tool templ generate

# Generated templ code is committed; fail when it is stale.
check-generated:
	@$(GO) tool templ generate >/dev/null 2>&1
	@git diff --exit-code --stat -- '*_templ.go' || { echo "templ output was stale: commit the regenerated files"; exit 1; }

vet:
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
