# wsu — build, test, lint, demo. `make help` lists the targets.
GO       ?= go
VERSION  ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X github.com/wsu-project/wsu/version.Version=$(VERSION)
BIN      := bin/wsu
# The cluster face, a binary of its own so the CLI links none of the
# controller (`wsu controller ARGS` runs it from beside wsu or PATH).
CONTROLLER_BIN := bin/wsu-controller
# The node agent builds wsu carries (embedded by make build) and deploys.
AGENT_PLATFORMS := windows/amd64 linux/amd64
# Stripped, with paths trimmed: every byte goes to every new node. -X still
# stamps the version the agent reports.
AGENT_LDFLAGS   := -s -w $(LDFLAGS)
# What the agent must never link (make lint): the CLI's language, cluster
# and command-line libraries, and net/http and crypto/tls (+60% of the
# agent; its net.http op is host/osnet's own plain HTTP/1.1 client).
AGENT_FORBIDDEN := github.com/hashicorp/hcl|github.com/zclconf/go-cty|k8s.io/client-go|sigs.k8s.io/controller-runtime|github.com/spf13/cobra|net/http|crypto/tls
# The goal for the windows/amd64 agent's size, in bytes (12 MB).
AGENT_MAX_BYTES := 12000000
TOOLS    := $(CURDIR)/bin/tools
STATICCHECK_VERSION := v0.8.2
CONTROLLER_GEN_VERSION := v0.23.0
CONTROLLER_GEN := $(TOOLS)/controller-gen-$(CONTROLLER_GEN_VERSION)
FUZZTIME ?= 30s

.PHONY: help build agents generate test kubetest lint docs docs-modules demo demo-controller fuzz bench bench-fleet bench-smoke bench-engine clean tools image image-context payload-image dockerfile manifests chart helm bundle bundle-release olm-validate

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

# Static and -trimpath, as the image's wsu is built (build/image): the image
# build and its tests then find every package compiled already.
build: agents ## build bin/wsu and bin/wsu-controller, carrying the node agents they deploy
	CGO_ENABLED=0 $(GO) build -trimpath -tags wsu_embed_agents -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/wsu
	CGO_ENABLED=0 $(GO) build -trimpath -tags wsu_embed_agents -ldflags "$(LDFLAGS)" -o $(CONTROLLER_BIN) ./cmd/wsu-controller

# bin/wsu-agent-GOOS-GOARCH[.exe], copied into cmd/internal/agents (ignored by
# git) for the embed with its sha256 and size beside it (NAME.sha256, so a
# run need not read and hash the build to compare it with a host's); a wsu
# built without make finds them in bin/.
agents: ## cross-build the node agent (cmd/wsu-agent) for AGENT_PLATFORMS
	@mkdir -p bin cmd/internal/agents
	@rm -f cmd/internal/agents/wsu-agent-*
	@set -e; for p in $(AGENT_PLATFORMS); do \
	  os=$${p%/*}; arch=$${p#*/}; out=bin/wsu-agent-$$os-$$arch; \
	  if [ $$os = windows ]; then out=$$out.exe; fi; \
	  echo "GOOS=$$os GOARCH=$$arch go build -o $$out ./cmd/wsu-agent"; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags "$(AGENT_LDFLAGS)" -o $$out ./cmd/wsu-agent; \
	  cp $$out cmd/internal/agents/; \
	  echo "$$(sha256sum < $$out | cut -d' ' -f1) $$(wc -c < $$out)" > cmd/internal/agents/$$(basename $$out).sha256; \
	done

# The container images (build/image; docs/install.md): no daemon, no base
# image, reproducible (every timestamp is the commit's).
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
IMAGE_FLAGS = -version $(VERSION) -revision $(REVISION) -source-date-epoch $(SOURCE_DATE_EPOCH) -context bin/image/context

image: ## build bin/wsu-image.tar (OCI layout + docker-archive), print its digest, and write its SBOM bin/wsu-image.spdx.json
	$(GO) run ./build/image/wsu-image build $(IMAGE_FLAGS) -o bin/wsu-image.tar

image-context: ## stage bin/image/context, the build context of the Dockerfile
	$(GO) run ./build/image/wsu-image context $(IMAGE_FLAGS)

payload-image: image ## build bin/wsu-payload-image.tar: the wsu image plus PAYLOAD=DIR, verified
	@test -n "$(PAYLOAD)" || { echo "usage: make payload-image PAYLOAD=DIR"; exit 1; }
	$(GO) run ./build/image/wsu-image payload $(IMAGE_FLAGS) -payload $(PAYLOAD) -o bin/wsu-payload-image.tar

dockerfile: ## regenerate the Dockerfile from build/image's file list
	$(GO) run ./build/image/wsu-image dockerfile > Dockerfile

manifests: chart bundle ## render deploy/overlays into deploy/rendered (kustomize), the Helm chart and the OLM bundle
	$(GO) test -count=1 ./deploy -run TestRendered -update

chart: ## regenerate the Helm chart deploy/helm/wsu from the kustomize overlays
	$(GO) test -count=1 ./deploy -run 'TestChart$$' -update

bundle: ## regenerate the OLM bundle deploy/olm from the openshift overlay
	$(GO) test -count=1 ./deploy -run 'TestBundle$$' -update

# A release's or a site's bundle into BUNDLE_OUT (an absolute path): the
# images' repositories (IMAGE=, PAYLOAD_IMAGE=, registry/repository) and
# digests (IMAGE_DIGEST=, PAYLOAD_IMAGE_DIGEST=; make image prints the wsu
# image's), each optional; then build it with its bundle.Dockerfile.
BUNDLE_OUT ?= $(CURDIR)/bin/olm
bundle-release: ## write the OLM bundle with IMAGE=, PAYLOAD_IMAGE=, IMAGE_DIGEST=, PAYLOAD_IMAGE_DIGEST= into BUNDLE_OUT (bin/olm)
	$(GO) test -count=1 ./deploy -run 'TestBundle$$' -bundle-out=$(BUNDLE_OUT) \
	  -bundle-image=$(IMAGE) -bundle-payload-image=$(PAYLOAD_IMAGE) \
	  -bundle-image-digest=$(IMAGE_DIGEST) -bundle-payload-image-digest=$(PAYLOAD_IMAGE_DIGEST)

olm-validate: ## run the operator framework's bundle validators on deploy/olm/bundle (test/olmvalidate)
	cd test/olmvalidate && $(GO) test -count=1 ./...

helm: ## build the helm the chart's tests run (helm.sh/helm/v3, cached in ~/.cache/wsu/tools) and print its path
	$(GO) run ./test/helmtool/ensure-helm

# The first run builds the Kubernetes test bed (kube-apiserver, etcd, and for the
# workload tests kube-controller-manager and kube-scheduler; several
# minutes, cached): hence the timeout. `make kubetest` builds it ahead.
test: ## run every test tier (the README's test command)
	$(GO) test -count=1 -timeout 30m ./...
	cd test/capirender && $(GO) test -count=1 ./...  # Cluster API's own rendering, a module of its own
	cd test/olmvalidate && $(GO) test -count=1 ./...  # the operator framework's bundle validation, likewise

kubetest: ## build and cache the etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubectl the tests run
	./test/kubetest/build.sh

lint: tools ## gofmt, go vet, staticcheck, and playbook formatting
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	GOOS=windows $(GO) vet ./...  # every package's Windows build, tests included
	GOOS=windows $(GO) build -o /dev/null ./cmd/wsu
	@for os in linux windows; do \
	  bad=$$(GOOS=$$os $(GO) list -deps ./cmd/wsu-agent | grep -E '^($(AGENT_FORBIDDEN))' || true); \
	  if [ -n "$$bad" ]; then echo "cmd/wsu-agent (GOOS=$$os) links what the node agent must not:"; echo "$$bad"; exit 1; fi; \
	done; echo "cmd/wsu-agent links no HCL, cty, client-go, controller-runtime, cobra, net/http or crypto/tls"
	@mkdir -p bin; CGO_ENABLED=0 GOOS=windows GOARCH=amd64 $(GO) build -trimpath -ldflags "$(AGENT_LDFLAGS)" -o bin/.lint-wsu-agent.exe ./cmd/wsu-agent; \
	  n=$$(wc -c < bin/.lint-wsu-agent.exe); rm -f bin/.lint-wsu-agent.exe; \
	  if [ $$n -gt $(AGENT_MAX_BYTES) ]; then echo "the windows/amd64 agent is $$n bytes, over $(AGENT_MAX_BYTES)"; exit 1; fi; \
	  echo "windows/amd64 agent: $$n bytes (at most $(AGENT_MAX_BYTES))"
	$(TOOLS)/staticcheck ./...
	$(GO) run ./cmd/wsu fmt --check $(wildcard examples playbooks)

tools: $(TOOLS)/staticcheck ## install the lint tools into bin/tools

# Cached by version, as kubetest caches its binaries: a new version is a new file.
$(CONTROLLER_GEN):
	GOBIN=$(TOOLS)/cg-$(CONTROLLER_GEN_VERSION) $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(TOOLS)/cg-$(CONTROLLER_GEN_VERSION)/controller-gen $@ && rmdir $(TOOLS)/cg-$(CONTROLLER_GEN_VERSION)

generate: $(CONTROLLER_GEN) ## regenerate the API's deepcopy code, the CRD and the controller's RBAC (controller-gen)
	$(CONTROLLER_GEN) object paths=./api/...
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:dir=deploy/crd
	$(CONTROLLER_GEN) rbac:roleName=wsu-controller paths=./controller/... output:rbac:dir=deploy/rbac/controller

$(TOOLS)/staticcheck:
	GOBIN=$(TOOLS) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

docs: docs-modules ## regenerate docs/modules.md and docs/playbooks.md from the module schemas and stock playbooks
	$(GO) run ./cmd/wsu playbooks doc --markdown > docs/playbooks.md

docs-modules: ## regenerate docs/modules.md from the module schemas (after adding or changing a module)
	$(GO) run ./cmd/wsu modules --markdown > docs/modules.md

demo: build ## plan, apply and re-plan the demo playbook
	./scripts/demo.sh

demo-controller: build ## the cluster face: a BYOH entry joined by the controller from the shipped manifests, approved, removed
	./scripts/demo.sh --controller

fuzz: ## run every fuzz target for FUZZTIME each
	./scripts/fuzz.sh $(FUZZTIME)

# One table, all measured in this run: wsu's join against the raw ssh copy
# and WinRM upload speed (docs/performance.md). Minutes; e.g.
# BENCH_FLAGS="--runs 3" for medians, BENCH_FLAGS="--hosts 1 --size small".
BENCH_FLAGS ?=
bench: build ## wsu against the floor, one table (docs/performance.md)
	$(GO) build -o bin/wsu-bench ./test/bench
	bin/wsu-bench --wsu $(BIN) $(BENCH_FLAGS)

bench-fleet: build ## make bench plus the 100-host row sets (small payload; the CLI's, the controller's): tens of minutes
	$(GO) build -o bin/wsu-bench ./test/bench
	bin/wsu-bench --wsu $(BIN) --fleet 100 --controller-fleet 100 $(BENCH_FLAGS)

bench-smoke: build ## the bench, short (CI): fails only when something fails to run
	$(GO) build -o bin/wsu-bench ./test/bench
	bin/wsu-bench --wsu $(BIN) --smoke

bench-engine: ## engine microbenchmarks (and the stock join's playbook load)
	$(GO) test -run '^$$' -bench . -benchmem ./engine/ ./playbooks/

clean: ## remove build output
	rm -rf bin cmd/internal/agents/wsu-agent-*
