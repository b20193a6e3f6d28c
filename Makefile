# Porthole — `make help` lists the targets.
SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(HOME)/go/bin:$(PATH)
export CGO_ENABLED ?= 1

BIN        := bin/porthole
ADDR       ?= 127.0.0.1:8080
DATA       ?= ./data
GO_PKGS    := ./...
TEST_FLAGS ?= -race -count=1 -timeout 45m
BENCH_TIME ?= 1x

# Services the tests use (build/scripts/services.sh starts them).
export PORTHOLE_TEST_PG     ?= postgres://porthole:porthole@127.0.0.1:5432/porthole_test?sslmode=disable
export PORTHOLE_TEST_ENGINE ?= unix:///run/porthole-test/podman.sock
# The agent image (build/agent-image/build.sh); the tests build it when missing or outdated.
AGENT_IMAGE ?= porthole-agent:latest

.DEFAULT_GOAL := help

help: ## List the targets.
	@awk 'BEGIN{FS=":.*## "} /^[a-zA-Z_-]+:.*## /{printf "  \033[1m%-10s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

deps: ## Install the missing Debian and npm packages the server needs.
	@build/scripts/deps.sh

deps-dev: ## Install the missing packages the tests also need (podman, PostgreSQL, headers).
	@build/scripts/deps.sh --dev

include build/web.mk

build: web ## Build bin/porthole with the web app embedded.
	go build -trimpath -o $(BIN) ./cmd/porthole
	@echo "built $(BIN) ($$(du -h $(BIN) | cut -f1))"

run: deps build ## Install what is missing, build, and serve on $(ADDR) (SQLite, data in $(DATA)).
	$(BIN) serve --addr $(ADDR) --data $(DATA)

services: ## Start PostgreSQL and the podman API service for the tests (root).
	@build/scripts/services.sh

image: ## Build the agent container image ($(AGENT_IMAGE)) from this machine's Debian packages.
	build/agent-image/build.sh $(AGENT_IMAGE)

vet: ## go vet, and gofmt must have nothing to change.
	go vet $(GO_PKGS)
	@out=$$(gofmt -l $$(git ls-files '*.go')); [ -z "$$out" ] || { echo "gofmt would change: $$out"; exit 1; }
	GOOS=js GOARCH=wasm go vet ./app/... ./api/...

test: deps-dev services build vet ## Run every test (real jails, containers, PostgreSQL, Chromium) with -race.
	go test $(TEST_FLAGS) $(GO_PKGS)
	@$(MAKE) --no-print-directory fuzz

FUZZ_TIME ?= 15s
fuzz: ## Fuzz every wire-protocol decoder for $(FUZZ_TIME) each (seed corpora run in `test`).
	@grep -rl --include='*_test.go' '^func Fuzz' . | while read -r f; do \
		pkg=./$$(dirname $${f#./}); \
		for fn in $$(grep -o '^func Fuzz[A-Za-z0-9_]*' $$f | sed 's/func //'); do \
			echo "fuzz $$pkg $$fn ($(FUZZ_TIME))"; \
			go test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZ_TIME) $$pkg || exit 1; \
		done; \
	done

bench: deps-dev services build ## Measure the targets of DESIGN.md and print them against their baselines.
	@mkdir -p bin
	go test -run '^$$' -bench . -benchtime $(BENCH_TIME) -timeout 30m $(GO_PKGS) 2>&1 | tee bin/bench.txt
	@go run ./internal/benchtable < bin/bench.txt

clean: ## Remove build output (not the data dir).
	rm -rf bin
	@$(MAKE) --no-print-directory web-clean

.PHONY: help deps deps-dev build run services image vet test fuzz bench clean
