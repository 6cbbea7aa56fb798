# valtune. The README's two commands: `make demo` (the lab plus an experiment) and
# `make test` (everything CI checks). `make help` lists the rest.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

CARGO ?= cargo
# Where hack/tools/build.sh puts the control-plane binaries (computed, not built, here).
TOOLS_BIN := $(shell hack/tools/build.sh --print-bin-dir)
export VALTUNE_TOOLS_BIN := $(TOOLS_BIN)
KUBECTL := $(TOOLS_BIN)/kubectl
LAB := ./target/debug/valtune-lab
VALTUNE := ./target/debug/valtune

# Argo CD's build for the GitOps tests (computed, not built, here: `make argocd`).
ARGOCD_DIR := $(shell hack/tools/build-argocd.sh --print-dir)
export VALTUNE_ARGOCD_DIR := $(ARGOCD_DIR)

LAB_DIR ?= .lab
TEST_LAB_DIR ?= target/test-lab
GITOPS_LAB_DIR ?= target/gitops-lab
# Simulated seconds per real second in the lab (manifests/examples are written for 720).
TIME_SCALE ?= 720

.PHONY: help tools agave argocd install build crds check-crds manifests chart-test image golden lint unit test test-examples test-gitops test-under-load soak-identity bench bench-search lab-up lab-down demo demo-down

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

tools: ## build the lab's control-plane tools into ~/.cache/valtune (once per version)
	@hack/tools/build.sh >/dev/null

agave: ## build the pinned agave-validator and Solana tools from their crates into ~/.cache/valtune/agave (about an hour or more on 2 cores; not in make test)
	@hack/tools/build-agave.sh

argocd: ## build Argo CD v3.6.2 for the GitOps tests into ~/.cache/valtune (once per version)
	@hack/tools/build-argocd.sh >/dev/null

install: ## install the valtune CLI into ~/.cargo/bin, and kubectl-valtune beside it (`kubectl valtune ...`)
	$(CARGO) install --locked --path operator
	ln -sf valtune "$${CARGO_HOME:-$$HOME/.cargo}/bin/kubectl-valtune"

build: ## build the valtune and valtune-lab binaries
	$(CARGO) build --workspace --bins

crds: build ## regenerate crds/ (and the chart's copy) from the API types
	$(VALTUNE) crd --out-dir crds
	$(VALTUNE) crd --out-dir charts/valtune/files/crds

check-crds: build ## fail if crds/ or the chart's CRDs are not what the code generates
	@tmp=$$(mktemp -d); $(VALTUNE) crd --out-dir $$tmp; \
	for d in crds charts/valtune/files/crds; do if ! diff -ru $$d $$tmp; then rm -rf $$tmp; \
	  echo "$$d is stale: run 'make crds' and commit the result" >&2; exit 1; fi; done; rm -rf $$tmp

manifests: tools ## regenerate what is rendered from the chart: manifests/install/valtune.yaml, the argocd-cm patch
	hack/install-manifest.sh > manifests/install/valtune.yaml
	hack/argocd-cm.sh > charts/valtune/argocd/argocd-cm.yaml

chart-test: tools ## the chart's offline checks: lint, template, promtool rule tests, Argo CD health checks
	hack/chart-test.sh

image: ## build the operator's OCI image (no Docker, no lab tools: crane only) into target/image; prints its digest
	@hack/tools/build.sh --only crane >/dev/null
	hack/image.sh

golden: ## rewrite the golden files of rendered pods (clients/*/testdata) after an intended change
	UPDATE_GOLDEN=1 $(CARGO) test -p valtune --lib golden

lint: ## rustfmt and clippy, warnings are errors
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

unit: ## unit tests only (no lab)
	$(CARGO) test --workspace

test: tools build check-crds chart-test lint ## all tests: unit, and the lab tests against a fresh lab (the chart installed in it)
	@$(LAB) down --dir $(TEST_LAB_DIR) >/dev/null 2>&1 || true
	$(LAB) up --dir $(TEST_LAB_DIR) --topology lab/topology-test.yaml --time-scale $(TIME_SCALE) >/dev/null
	@# Lab tests mostly wait on the lab (simulated time), so they run eight at a time: on 2
	@# cores each took as long as at six (4,022 s in all both ways), the suite 580 s not 732.
	@# The GitOps tests need Argo CD in the lab: make test-gitops.
	@status=0; VALTUNE_LAB_DIR=$$(cd $(TEST_LAB_DIR) && pwd) \
	  $(CARGO) test --workspace --no-fail-fast -- --include-ignored --test-threads=8 --skip gitops:: || status=$$?; \
	if [ $$status -ne 0 ]; then $(LAB) down --dir $(TEST_LAB_DIR) --keep; \
	  echo "tests failed; the lab's logs are kept in $(TEST_LAB_DIR)/logs" >&2; \
	else $(LAB) down --dir $(TEST_LAB_DIR); fi; exit $$status

EXAMPLES_LAB_DIR ?= target/examples-lab
test-examples: tools build ## every example in manifests/, as its header says, in a lab like make lab-up's (the chart installed): experiments Succeeded, Validators Ready
	@$(LAB) down --dir $(EXAMPLES_LAB_DIR) >/dev/null 2>&1 || true
	$(LAB) up --dir $(EXAMPLES_LAB_DIR) --time-scale $(TIME_SCALE) >/dev/null
	@status=0; eval "$$($(LAB) env --dir $(EXAMPLES_LAB_DIR))"; \
	$(TOOLS_BIN)/helm upgrade --install valtune charts/valtune --namespace valtune-system --create-namespace \
	  --set operator.prometheusUrl="$$PROMETHEUS_URL" --set metrics.serviceMonitor.enabled=false \
	  --set metrics.podMonitor.enabled=true --wait --timeout 3m >/dev/null || status=$$?; \
	[ $$status -ne 0 ] || VALTUNE_LAB_DIR=$$(cd $(EXAMPLES_LAB_DIR) && pwd) \
	  $(CARGO) test -p valtune --test examples -- --include-ignored --nocapture || status=$$?; \
	if [ $$status -ne 0 ]; then $(LAB) down --dir $(EXAMPLES_LAB_DIR) --keep; \
	  echo "an example failed; the lab's logs are kept in $(EXAMPLES_LAB_DIR)/logs" >&2; \
	else $(LAB) down --dir $(EXAMPLES_LAB_DIR); fi; exit $$status

SOAK_LAB_DIR ?= target/soak-lab
SEEDS ?= 200
soak-identity: tools build ## random fault schedules against failover pairs, SEEDS of them (default 200), on a lab of their own: never two signers
	@$(LAB) down --dir $(SOAK_LAB_DIR) >/dev/null 2>&1 || true
	$(LAB) up --dir $(SOAK_LAB_DIR) --topology lab/topology-soak.yaml --time-scale $(TIME_SCALE) >/dev/null
	@status=0; VALTUNE_LAB_DIR=$$(cd $(SOAK_LAB_DIR) && pwd) SOAK_SEEDS=$(SEEDS) \
	  $(CARGO) test -p valtune --test lab -- --include-ignored --exact identity::random_fault_schedules_never_make_two_signers --nocapture || status=$$?; \
	if [ $$status -ne 0 ]; then $(LAB) down --dir $(SOAK_LAB_DIR) --keep; \
	  echo "the soak failed; the lab's logs and signing record are kept in $(SOAK_LAB_DIR)" >&2; \
	else $(LAB) down --dir $(SOAK_LAB_DIR); fi; exit $$status

test-gitops: tools argocd build ## the GitOps tests: a lab running Argo CD v3.6.2 syncs the chart, experiments and Validators
	@$(LAB) down --dir $(GITOPS_LAB_DIR) >/dev/null 2>&1 || true
	$(LAB) up --dir $(GITOPS_LAB_DIR) --topology lab/topology-test.yaml --time-scale $(TIME_SCALE) --argocd >/dev/null
	@status=0; VALTUNE_LAB_DIR=$$(cd $(GITOPS_LAB_DIR) && pwd) \
	  $(CARGO) test -p valtune --test lab -- --include-ignored --test-threads=8 gitops:: || status=$$?; \
	if [ $$status -ne 0 ]; then $(LAB) down --dir $(GITOPS_LAB_DIR) --keep; \
	  echo "tests failed; the lab's logs are kept in $(GITOPS_LAB_DIR)/logs" >&2; \
	else $(LAB) down --dir $(GITOPS_LAB_DIR); fi; exit $$status

test-under-load: tools build ## make test with a second lab running the demo beside it, RUNS times in a row (not in CI)
	KUBECTL=$(KUBECTL) HELM=$(TOOLS_BIN)/helm MAKE="$(MAKE)" hack/test-under-load.sh

bench: tools ## the operator's footprint on a lab of its own: BENCH_TRIALS trials (default 100) started at once, on as many nodes
	$(CARGO) build --release -p valtune-lab --bin valtune-lab
	VALTUNE_LAB_EXE=$$(pwd)/target/release/valtune-lab $(CARGO) test --release -p valtune --test bench -- --include-ignored --nocapture

bench-search: tools build ## the quickstart's question at 64Gi resolution by bisection and by grid, on 3 lab nodes: answers, node-hours, wall-clock
	@# The debug build: what it measures is the search's cost, not the operator's speed.
	VALTUNE_LAB_EXE=$$(pwd)/$(LAB) $(CARGO) test -p valtune --test bench_search -- --ignored --nocapture

lab-up: tools build $(if $(ARGOCD),argocd,) ## start the lab in .lab (kubeconfig: .lab/kubeconfig); ARGOCD=1 runs Argo CD in it
	$(LAB) up --dir $(LAB_DIR) --time-scale $(TIME_SCALE) $(if $(ARGOCD),--argocd,)

lab-down: ## stop the lab's processes and remove .lab (KEEP=1 keeps logs and data)
	@if [ ! -x $(LAB) ]; then $(CARGO) build -p valtune-lab; fi
	$(LAB) down --dir $(LAB_DIR) $(if $(KEEP),--keep,)

demo: lab-up ## what a user does, in the lab: helm install the chart, kubectl apply the RAM sweep, the results
	LAB_DIR=$(LAB_DIR) KUBECTL=$(KUBECTL) HELM=$(TOOLS_BIN)/helm hack/demo.sh
