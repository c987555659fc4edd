# tock: the two commands a fresh machine needs are `make dev` and `make test`.
GO            ?= go
STATICCHECK   ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
GCI           ?= github.com/daixiang0/gci@v0.14.0
# Import blocks: the standard library, then third-party modules, then tock's own packages.
GCI_SECTIONS  := -s standard -s default -s 'prefix(github.com/tock-sched/tock)' --skip-generated
TEST_FLAGS    ?= -race -count=1 -timeout 12m -p 2
BIN           := bin
NODES         ?= 3

.PHONY: dev test fuzz chaos chaos-cluster bench-cluster build generate lint postgres tools clean

## dev: start tock on this machine (local Postgres; etcd and NATS embedded)
dev: postgres build
	$(BIN)/tockd dev

## test: go vet and the whole test suite with the race detector (the dashboard's
## browser tests install Debian's Chromium and ui/node_modules when missing; the
## monitoring rules' tests, Debian's prometheus for promtool and prometheus).
## ./node/ comes first: go test starts packages' tests in the order it is given
## them, and node's are the longest (9 minutes, mostly waiting); the other
## packages then run beside it instead of before it (docs/bench.md).
test: postgres
	./scripts/ensure-ui.sh --browser
	./scripts/ensure-prometheus.sh
	$(GO) vet ./...
	$(GO) test $(TEST_FLAGS) ./node/ ./...

## fuzz: the API's fuzz tests (bad JSON, query strings, cursors against a real
## Postgres), FUZZTIME each (default 30s); `make test` runs their seed corpus.
## A crasher is written to api/testdata/fuzz/; a bare "context deadline exceeded"
## at the end of FUZZTIME with none written is Go's own race (go.dev/issue/75804,
## fixed in Go 1.27), reported and not failed on.
FUZZTIME      ?= 30s
FUZZ_TARGETS  := FuzzCreateJob FuzzPatchJob FuzzListJobs FuzzCursor FuzzJSONMatchesPostgres
fuzz: postgres
	@for t in $(FUZZ_TARGETS); do \
	  echo "== $$t"; \
	  out=$$($(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) ./api/ 2>&1); rc=$$?; \
	  echo "$$out" | tail -n 4; \
	  if [ $$rc -ne 0 ]; then \
	    if echo "$$out" | grep -q 'Failing input written' || ! echo "$$out" | grep -q 'context deadline exceeded'; then \
	      echo "$$out"; exit 1; \
	    fi; \
	    echo "   (context deadline exceeded at the end of FUZZTIME, no failing input: go.dev/issue/75804)"; \
	  fi; \
	done

## chaos: the long chaos test (3 nodes, 2,000 every-second jobs, 3 minutes of kill -9,
## SIGSTOP and SIGTERM); `make test` runs a short form of the same test
chaos: postgres
	TOCK_CHAOS_JOBS=2000 TOCK_CHAOS_DURATION=3m $(GO) test -count=1 -timeout 20m -run '^TestChaosKillRestartPause$$' -v ./node/

## chaos-cluster: the cluster chaos test (3 tockd, 3 etcd members, 3 NATS servers with
## R3 streams, a Patroni primary and synchronous standby; kill -9, SIGSTOP, SIGTERM,
## member and server stops, Postgres failovers and one etcd quorum loss) for
## CHAOS_DURATION (default 30m) with CHAOS_JOBS every-second jobs (default 200);
## `make test` runs a short form (docs/operations.md). CHAOS_PG_ASYNC=1 makes the
## standby asynchronous, to show what the synchronous one buys.
CHAOS_DURATION ?= 30m
CHAOS_JOBS     ?= 200
CHAOS_PG_ASYNC ?=
chaos-cluster: postgres
	./scripts/ensure-patroni.sh
	TOCK_CHAOS_JOBS=$(CHAOS_JOBS) TOCK_CHAOS_DURATION=$(CHAOS_DURATION) TOCK_CHAOS_PG_ASYNC=$(CHAOS_PG_ASYNC) $(GO) test -count=1 -timeout 90m -run TestChaosClusterEverythingFails -v ./node/

## bench-cluster: NODES tockd nodes on this machine (default 3): tockd dev plus NODES-1
## tockd serve sharing its Postgres, etcd and NATS; Ctrl-C stops them all (docs/bench.md)
bench-cluster: postgres build
	TOCKD=$(BIN)/tockd ETCDCTL=$(BIN)/etcdctl ./scripts/cluster.sh run $(NODES)

## build: tockd, tockctl, the example executor and etcdctl (pinned with the etcd client) into ./bin
build:
	$(GO) build -o $(BIN)/ ./cmd/... ./examples/...
	$(GO) build -o $(BIN)/etcdctl go.etcd.io/etcd/etcdctl/v3

## generate: regenerate committed generated code (API models, OpenAPI server, Go client,
## the dashboard's API types) and rebuild the dashboard (ui/dist, embedded in tockd)
generate:
	$(GO) generate ./...
	./scripts/ensure-ui.sh
	cd ui && npm run --silent generate && npm run --silent check && npm run --silent build

## lint: gofmt, import grouping (gci), go vet, staticcheck (both fetched through the Go
## module proxy), the OpenAPI document's lint (Spectral, pinned in tools/spectral,
## rules in api/.spectral.yaml), and the dashboard: TypeScript checks, and the
## committed build and API types match their sources (scripts/lint-ui.sh)
lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	@misgrouped=$$($(GO) run $(GCI) list $(GCI_SECTIONS) $$(git ls-files '*.go')) || exit 1; \
	  if [ -n "$$misgrouped" ]; then \
	    echo "imports not grouped as standard library, third-party, github.com/tock-sched/tock"; \
	    echo "(fix: $(GO) run $(GCI) write $(GCI_SECTIONS) FILE...):"; echo "$$misgrouped"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	./scripts/lint-openapi.sh
	./scripts/lint-ui.sh

## postgres: make sure PostgreSQL runs on 127.0.0.1:5432 (installs it if missing)
postgres:
	@./scripts/ensure-postgres.sh

clean:
	rm -rf $(BIN) .dev ui/node_modules
