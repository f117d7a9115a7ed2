# Hostplane — the two commands that matter on a fresh machine:
#   make run    everything in one process (hostplane dev) on http://127.0.0.1:8080
#   make test   builds what it needs (release binaries, tools) and runs every test
SHELL := /bin/bash
.DEFAULT_GOAL := help

MODULES   := pkg services/clusterd services/nodepoold services/componentd services/ignitiond \
             services/pkid services/infrad services/localcloud cmd/hostplane test/e2e bench
PKGS      := $(addprefix ./,$(addsuffix /...,$(MODULES)))
DAEMONS   := clusterd nodepoold componentd ignitiond pkid infrad
BIN       := bin
GO        ?= go
# Test settings: two packages at a time (each may run real control planes on 2 cores).
TEST_FLAGS ?= -count=1 -p 2 -timeout 45m
RUN_FLAGS  ?=

.PHONY: help
help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

.PHONY: k8s-bins
k8s-bins: ## build etcd and the Kubernetes release binaries into ~/.cache/hostplane (skips what is built)
	@tools/k8s-bins/build.sh

.PHONY: build
build: ## build the hostplane CLI and the six daemons into bin/
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/hostplane ./cmd/hostplane
	@for d in $(DAEMONS); do echo "$(GO) build -o $(BIN)/$$d ./services/$$d/cmd/$$d"; \
	  CGO_ENABLED=0 $(GO) build -o $(BIN)/$$d ./services/$$d/cmd/$$d || exit 1; done
	CGO_ENABLED=0 $(GO) build -o $(BIN)/localcloud ./services/localcloud/cmd/localcloud

.PHONY: run
run: k8s-bins ## run everything in one process: hostplane dev on http://127.0.0.1:8080 (Ctrl-C stops it)
	$(GO) run ./cmd/hostplane dev $(RUN_FLAGS)

.PHONY: test
test: k8s-bins ## build what the tests need and run every test (the compose smoke test too)
	$(GO) vet $(PKGS)
	$(GO) test $(TEST_FLAGS) $(PKGS)
	$(MAKE) compose-test

.PHONY: compose-test
compose-test: images ## bring deploy/compose up on the local Docker engine, smoke-test it through the gateway, tear it down
	HOSTPLANE_COMPOSE_TEST=1 $(GO) test -count=1 -timeout 30m -v -run '^TestCompose_' ./test/e2e

.PHONY: bench
bench: k8s-bins ## run the benchmarks (results go into BENCHMARKS.md by hand, with the command)
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 60m ./bench/...

.PHONY: lint
lint: ## gofmt and go vet
	@out=$$(gofmt -l $(MODULES) tools); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

.PHONY: images
images: k8s-bins ## build the FROM-scratch images: six daemons, local cloud, CLI, gateway, management apiserver, NATS (no registry needed)
	@deploy/images/build.sh

.PHONY: clean
clean: ## remove build outputs and the default data dir (not the release-binary cache)
	rm -rf $(BIN) .hostplane
