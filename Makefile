# Hostplane — the two commands that matter on a fresh machine:
#   make run    everything in one process (hostplane dev) on http://127.0.0.1:8080
#   make test   builds what it needs (release binaries, tools) and runs every test
SHELL := /bin/bash
.DEFAULT_GOAL := help

MODULES   := pkg apis services/clusterd services/nodepoold services/componentd services/ignitiond \
             services/pkid services/infrad services/localcloud cmd/hostplane cmd/hostplane-karpenter test/apicheck test/integration test/e2e bench
PKGS      := $(addprefix ./,$(addsuffix /...,$(MODULES)))
# make test runs test/e2e (the longest package: 16-20 min, its CPU half idle while it waits on
# processes) in the background beside every other package and then the real-kubelet tests
# (docs/testing.md); `make go-test` runs them all in one go test, test/e2e first so it starts
# at once.
E2E_PKGS  := ./test/e2e/...
REST_PKGS := $(filter-out $(E2E_PKGS),$(PKGS))
TEST_PKGS := $(E2E_PKGS) ./test/integration/... $(filter-out ./test/integration/...,$(REST_PKGS))
# What make test-fast leaves out: test/e2e and componentd's integration package (5 min alone).
FAST_PKGS := $(filter-out ./test/integration/... ./bench/...,$(REST_PKGS)) ./test/integration/ignitiond/... ./test/integration/join/... ./test/integration/pkid/...
DAEMONS   := clusterd nodepoold componentd ignitiond pkid infrad
BIN       := bin
GO        ?= go
# Every Go build of make (vet, tests, the binaries the tests build, make build and run) without
# cgo: the daemons and images are static binaries anyway, and one build configuration lets each
# compiled package serve all of them from the build cache (a cgo build and a static one share
# almost nothing: on a cold machine the tests' hostplane-karpenter build alone took 3 minutes).
CGO_ENABLED ?= 0
export CGO_ENABLED
# Test settings: two packages at a time (each may run real control planes on 2 cores).
TEST_FLAGS ?= -count=1 -p 2 -timeout 45m
RUN_FLAGS  ?=
# Fuzzing: each target (every func Fuzz*, found by tools/fuzz.sh) runs this long in make fuzz,
# and FUZZTIME_SHORT in make test (15 targets: under a minute of fuzzing).
FUZZTIME       ?= 1m
FUZZTIME_SHORT ?= 3s

.PHONY: help
help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

.PHONY: k8s-bins
k8s-bins: ## build etcd and the Kubernetes release binaries into ~/.cache/hostplane (skips what is built)
	@tools/k8s-bins/build.sh

.PHONY: kubelet
kubelet: ## build the management release's kubelet into ~/.cache/hostplane (its own stamp; skips it when built)
	@tools/k8s-bins/kubelet.sh

.PHONY: node-image
node-image: ## build hostplane-node, the Docker image of a Kubernetes node booting with Ignition, from Debian packages (root; skips it when built)
	@tools/node-image/build.sh

.PHONY: registry
registry: ## build the CNCF Distribution registry (the OCI registry real nodes pull from) into ~/.cache/hostplane (skips it when built)
	@tools/registry/build.sh

.PHONY: coredns
coredns: ## build CoreDNS (tools/coredns: the DNS of guest clusters on real nodes, pushed to the registry by hostplane dev) into ~/.cache/hostplane (skips it when built)
	@tools/coredns/build.sh

.PHONY: mgmt-tools
mgmt-tools: ## install containerd, runc and the CNI plugins (Debian packages) the real management cluster runs, when missing
	@tools/mgmt-tools.sh

.PHONY: mgmt-test
mgmt-test: k8s-bins kubelet mgmt-tools ## the real management cluster's test (root): two kubelet nodes in network namespaces, pods spread, a lost node
	HOSTPLANE_MGMT_TEST=1 flock /tmp/e2e.lock $(GO) test -count=1 -v -timeout 20m ./test/integration/mgmtcluster

.PHONY: mgmt-kuberuntime-test
mgmt-kuberuntime-test: k8s-bins kubelet mgmt-tools ## componentd's kubernetes runtime on a real management cluster of 3 kubelet nodes (root): control planes as pods, a HighlyAvailable one spread and surviving a lost node
	HOSTPLANE_MGMT_KUBERUNTIME_TEST=1 flock /tmp/e2e.lock $(GO) test -count=1 -v -timeout 20m -run '^TestComponentd_KubernetesRuntime_OnRealKubelets' ./test/integration/componentd

.PHONY: mgmt-dev-test
mgmt-dev-test: k8s-bins kubelet mgmt-tools ## hostplane dev --runtime kubernetes on a management cluster of 2 kubelet nodes (root): a control plane as pods, its kubeconfig, a node pool, a restart on the same data dir, delete
	# flock -o: the cluster's processes must not inherit the lock (a killed test would keep it held)
	HOSTPLANE_MGMT_DEV_TEST=1 flock -o /tmp/e2e.lock $(GO) test -count=1 -v -timeout 20m -run '^TestDev_KubernetesRuntime_OnRealKubelets' ./cmd/hostplane/dev

.PHONY: mgmt-deploy-test
mgmt-deploy-test: k8s-bins kubelet mgmt-tools images ## deploy/k8s (the dev overlay) applied on a real management cluster of 3 kubelet nodes (root): NATS, the daemons, the gateway and the local cloud Ready, a cluster created through the gateway Available as pods, a node pool's nodes Ready, hibernate and wake on a GET, delete
	# flock -o: the cluster's processes must not inherit the lock (a killed test would keep it held)
	HOSTPLANE_MGMT_DEPLOY_TEST=1 flock -o /tmp/e2e.lock $(GO) test -count=1 -v -timeout 20m -run '^TestDeployK8s_DevOverlayOnRealKubelets' ./test/e2e

.PHONY: prometheus-tools
prometheus-tools: ## install prometheus and promtool (Debian's prometheus package) when missing
	@tools/prometheus.sh

.PHONY: chromium-tools
chromium-tools: ## install headless Chromium (Debian's chromium package) for the web console's e2e test, when missing
	@tools/chromium.sh

.PHONY: s3-tools
s3-tools: ## build SeaweedFS's weed, the S3-compatible store the backup-store tests run, into ~/.cache/hostplane (skips it when built)
	@tools/seaweedfs/build.sh

.PHONY: clusterctl
clusterctl: ## build Cluster API's clusterctl (the version nodepoold runs) into ~/.cache/hostplane for its e2e test (skips it when built)
	@tools/clusterctl/build.sh

.PHONY: build
build: ## build the hostplane CLI, the six daemons and the autoscaler (hostplane-karpenter) into bin/
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/hostplane ./cmd/hostplane
	$(GO) build -o $(BIN)/hostplane-karpenter ./cmd/hostplane-karpenter
	@for d in $(DAEMONS); do echo "$(GO) build -o $(BIN)/$$d ./services/$$d/cmd/$$d"; \
	  $(GO) build -o $(BIN)/$$d ./services/$$d/cmd/$$d || exit 1; done
	$(GO) build -o $(BIN)/localcloud ./services/localcloud/cmd/localcloud

.PHONY: run
# etcd and the newest release (the default cluster's and the management plane's) build beside
# the CLI (two builds at once keep both cores busy: the release's build alone leaves one idle
# for long stretches), then it serves while the other releases build in the background:
# GET /v1/releases (hostplane get releases) shows them Building, and a cluster that asks for
# one waits until it is built.
run: ## run everything in one process: hostplane dev on http://127.0.0.1:8080 (Ctrl-C stops it)
	@mkdir -p .hostplane $(BIN)
	@start=$$SECONDS; tools/k8s-bins/build.sh --newest & rel=$$!; \
	  { $(GO) build -o $(BIN)/hostplane ./cmd/hostplane && \
	    $(GO) build -o $(BIN)/hostplane-karpenter ./cmd/hostplane-karpenter && \
	    $(GO) build -o $(BIN)/hostplane-pause ./cmd/hostplane/internal/guestimages/pause && \
	    $(GO) build -o $(BIN)/hostplane-echo ./cmd/hostplane/internal/guestimages/echo && \
	    $(GO) build -o $(BIN)/hostplane-netd ./cmd/hostplane/internal/guestimages/netd && \
	    tools/registry/build.sh && tools/coredns/build.sh; } || { kill $$rel; exit 1; }; \
	  wait $$rel || exit 1; echo "[run] built in $$((SECONDS-start))s"
	@tools/k8s-bins/build.sh > .hostplane/k8s-bins.log 2>&1 & \
	  echo "building the other releases in the background: hostplane get releases; log in .hostplane/k8s-bins.log"; \
	  $(BIN)/hostplane dev $(RUN_FLAGS)

.PHONY: test
test: ## lint, then build what the tests need and run every test (the compose smoke test too); a timing summary of each phase ends the output
	@MAKE="$(MAKE)" tools/test.sh

.PHONY: test-tools
test-tools: k8s-bins kubelet node-image registry coredns mgmt-tools prometheus-tools chromium-tools clusterctl s3-tools ## build or install everything make test needs (each skipped when current)

.PHONY: go-test
go-test: ## go test of every package in one go (the real-kubelet management test included: root)
	HOSTPLANE_MGMT_TEST=1 $(GO) test $(TEST_FLAGS) $(TEST_PKGS)

.PHONY: go-test-e2e
go-test-e2e: ## go test of test/e2e alone (a phase of make test, in the background)
	$(GO) test $(TEST_FLAGS) $(E2E_PKGS)

.PHONY: go-test-rest
go-test-rest: ## go test of every package but test/e2e (a phase of make test); the real-kubelet management test is make mgmt-test
	$(GO) test $(TEST_FLAGS) ./test/integration/... $(filter-out ./test/integration/...,$(REST_PKGS))

.PHONY: test-fast
test-fast: ## before a commit: gofmt and the unit and integration tests but test/e2e and componentd's integration package (about 5 min warm)
	@out=$$(gofmt -l $(MODULES) tools); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) test -count=1 -p 2 -timeout 15m $(FAST_PKGS)

.PHONY: fuzz
fuzz: ## run every fuzz target for FUZZTIME each (default 1m), one after the other
	FUZZTIME=$(FUZZTIME) tools/fuzz.sh

.PHONY: fuzz-short
fuzz-short: ## every fuzz target for FUZZTIME_SHORT (3s) each; part of make test
	FUZZTIME=$(FUZZTIME_SHORT) tools/fuzz.sh

.PHONY: compose-test
compose-test: images ## bring deploy/compose up on the local Docker engine, smoke-test it through the gateway, tear it down
	HOSTPLANE_COMPOSE_TEST=1 $(GO) test -count=1 -timeout 30m -v -run '^TestCompose_' ./test/e2e

# The fault campaign (test/e2e/chaos_test.go): make test runs a short one (6 faults, 2
# clusters) inside compose-test; make chaos a long one. CHAOS_SEED=<seed> replays a schedule.
CHAOS_FAULTS   ?= 40
CHAOS_CLUSTERS ?= 4
CHAOS_SEED     ?=

.PHONY: chaos
chaos: images ## a long seeded fault campaign on deploy/compose (CHAOS_FAULTS, CHAOS_CLUSTERS, CHAOS_SEED)
	HOSTPLANE_COMPOSE_TEST=1 HOSTPLANE_CHAOS_FAULTS=$(CHAOS_FAULTS) HOSTPLANE_CHAOS_CLUSTERS=$(CHAOS_CLUSTERS) HOSTPLANE_CHAOS_SEED=$(CHAOS_SEED) \
	  $(GO) test -count=1 -timeout 90m -v -run '^TestCompose_FaultCampaign$$' ./test/e2e

.PHONY: bench
bench: k8s-bins ## run the benchmarks (results go into BENCHMARKS.md by hand, with the command)
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 60m ./bench/...

.PHONY: bench-kuberuntime
bench-kuberuntime: k8s-bins kubelet mgmt-tools ## create → Available under componentd's kubernetes runtime on a real management cluster of 3 kubelet nodes (root) beside the process runtime, same run, and both control planes' RSS
	HOSTPLANE_MGMT_KUBERUNTIME_TEST=1 flock /tmp/e2e.lock $(GO) test -run '^$$' -bench 'BenchmarkCreateToAvailable_KubernetesRuntimeBesideProcess' -benchtime 3x -timeout 30m ./test/integration/componentd

.PHONY: lint
lint: ## gofmt, go vet of every module alone, every module tidy and building alone with the import rules kept
	@out=$$(gofmt -l $(MODULES) tools); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	@# go vet of every module alone (GOWORK=off), which covers every package the workspace has
	@tools/modules.sh check
	@$(MAKE) -s generate && git diff --exit-code --stat -- $(GENERATED) || \
	  { echo "generated code is stale: run make generate and commit the result"; exit 1; }

# Generated code: controller-gen's DeepCopy of the Go types of Hostplane's own kinds.
GENERATED := apis/infrastructure/v1alpha1/zz_generated.deepcopy.go services/clusterd/controlplane/zz_generated.deepcopy.go

.PHONY: generate
generate: ## regenerate generated code (controller-gen DeepCopy of apis/infrastructure/v1alpha1 and clusterd's HostedControlPlane)
	cd apis && GOWORK=off GOFLAGS=-mod=mod $(GO) generate ./...
	cd services/clusterd && GOWORK=off GOFLAGS=-mod=mod $(GO) generate ./controlplane/...

.PHONY: modules
modules: ## after changing imports: rewrite each module's sibling replaces and tidy every module
	@tools/modules.sh sync

.PHONY: images
images: k8s-bins ## build the FROM-scratch images: six daemons, local cloud, CLI, gateway, management apiserver, NATS (no registry needed)
	@deploy/images/build.sh

.PHONY: clean
clean: ## remove build outputs and the default data dir (not the release-binary cache)
	rm -rf $(BIN) .hostplane
