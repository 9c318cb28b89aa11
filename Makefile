# wsu — build, test, lint, demo. `make help` lists the targets.
GO       ?= go
VERSION  ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X github.com/wsu-project/wsu/version.Version=$(VERSION)
BIN      := bin/wsu
TOOLS    := $(CURDIR)/bin/tools
STATICCHECK_VERSION := v0.8.2
FUZZTIME ?= 30s

.PHONY: help build test kubetest lint docs demo fuzz bench bench-smoke bench-engine clean tools

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

build: ## build bin/wsu
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/wsu

# The first run builds the Kubernetes test bed (kube-apiserver, etcd; several
# minutes, cached): hence the timeout. `make kubetest` builds it ahead.
test: ## run every test tier (the README's test command)
	$(GO) test -count=1 -timeout 30m ./...

kubetest: ## build and cache the kube-apiserver and etcd the tests run
	./test/kubetest/build.sh

lint: tools ## gofmt, go vet, staticcheck, and playbook formatting
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	GOOS=windows $(GO) vet $$(GOOS=windows $(GO) list -e -f '{{if .GoFiles}}{{.ImportPath}}{{end}}' ./... 2>/dev/null)
	GOOS=windows $(GO) build -o /dev/null ./cmd/wsu
	$(TOOLS)/staticcheck ./...
	$(GO) run ./cmd/wsu fmt --check $(wildcard examples playbooks)

tools: $(TOOLS)/staticcheck ## install the lint tools into bin/tools

$(TOOLS)/staticcheck:
	GOBIN=$(TOOLS) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

docs: ## regenerate docs/modules.md and docs/playbooks.md from the module schemas and stock playbooks
	$(GO) run ./cmd/wsu modules --markdown > docs/modules.md
	$(GO) run ./cmd/wsu playbooks doc --markdown > docs/playbooks.md

demo: build ## plan, apply and re-plan the demo playbook
	./scripts/demo.sh

fuzz: ## run every fuzz target for FUZZTIME each
	./scripts/fuzz.sh $(FUZZTIME)

# One table, all measured in this run: wsu's join against the raw ssh copy
# and WinRM upload speed (docs/performance.md). Minutes; e.g.
# BENCH_FLAGS="--runs 3" for medians, BENCH_FLAGS="--hosts 1 --size small".
BENCH_FLAGS ?=
bench: build ## wsu against the floor, one table (docs/performance.md)
	$(GO) build -o bin/wsu-bench ./test/bench
	bin/wsu-bench --wsu $(BIN) $(BENCH_FLAGS)

bench-smoke: build ## the bench, short (CI): fails only when something fails to run
	$(GO) build -o bin/wsu-bench ./test/bench
	bin/wsu-bench --wsu $(BIN) --smoke

bench-engine: ## engine microbenchmarks
	$(GO) test -run '^$$' -bench . -benchmem ./engine/

clean: ## remove build output
	rm -rf bin
