# agentproc: the commands the README documents.
GO ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
BENCHCOUNT ?= 5
FUZZTIME ?= 30s
STRESSCOUNT ?= 3
# STRESSBURNERS: how many CPU burners run beside make stress; empty means
# one per online CPU, which is Go's default GOMAXPROCS.
STRESSBURNERS ?=
# CMD: the command's own module (cmd/agentproc has a go.mod of its own, so
# that the library adds no MCP or CLI module to its users' builds); test,
# lint, cross and bench cover it too.
CMD := cmd/agentproc

.PHONY: all test cover stress bench lint cross fuzz

all: lint cross test

## test: the whole suite with the race detector.
test:
	$(GO) test -race -count=1 -timeout 15m ./...
	cd $(CMD) && $(GO) test -race -count=1 -timeout 15m ./...

## cover: the test suite with a coverage profile (build/cover.out), the
## total on the last line, and build/cover.html to browse.
cover:
	@mkdir -p build
	$(GO) test -race -count=1 -timeout 15m -covermode=atomic -coverprofile=build/cover.out ./...
	$(GO) tool cover -html=build/cover.out -o build/cover.html
	$(GO) tool cover -func=build/cover.out | tail -n 1
## stress: the whole suite with the race detector, STRESSCOUNT times, while
## one CPU burner per online CPU runs beside it. The burners are started and
## killed here, by PID, whether the tests pass, fail or are interrupted.
stress:
	@n=$(STRESSBURNERS); n=$${n:-$$(getconf _NPROCESSORS_ONLN)}; pids=; \
	trap 'kill $$pids 2>/dev/null; wait $$pids 2>/dev/null' EXIT; trap 'exit 130' INT; trap 'exit 143' TERM; \
	i=0; while [ $$i -lt $$n ]; do yes >/dev/null & pids="$$pids $$!"; i=$$((i+1)); done; \
	echo "stress: $$n CPU burners (PIDs$$pids) beside go test -race -count=$(STRESSCOUNT)"; \
	start=$$(date +%s); \
	AGENTPROC_STRESS=1 $(GO) test -race -count=$(STRESSCOUNT) -timeout 60m ./...; st=$$?; \
	echo "stress: go test exit $$st after $$(( $$(date +%s) - start ))s"; \
	exit $$st

## bench: agentproc against plain os/exec in the same run, with ratios.
bench:
	@mkdir -p build
	$(GO) test -run '^$$' -bench . -benchmem -count $(BENCHCOUNT) -timeout 60m ./... | tee build/bench.txt
	cd $(CMD) && $(GO) test -run '^$$' -bench . -benchmem -count $(BENCHCOUNT) -timeout 20m ./... | tee -a ../../build/bench.txt
	$(GO) run ./internal/benchratio < build/bench.txt

## lint: vet, gofmt, staticcheck and a tidy go.mod.
lint:
	$(GO) vet ./...
	cd $(CMD) && $(GO) vet ./...
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) run $(STATICCHECK) ./...
	cd $(CMD) && $(GO) run $(STATICCHECK) ./...
	$(GO) mod tidy -diff
	cd $(CMD) && $(GO) mod tidy -diff

## cross: vet for the other platforms the package supports.
cross:
	GOOS=windows $(GO) vet ./...
	GOOS=darwin $(GO) vet ./...
	GOOS=freebsd $(GO) vet ./...
	cd $(CMD) && GOOS=windows $(GO) vet ./...
	cd $(CMD) && GOOS=darwin $(GO) vet ./...
	cd $(CMD) && GOOS=freebsd $(GO) vet ./...

## fuzz: each fuzz target of every package for FUZZTIME (CI: 5s each),
## retried once only for Go 1.26's deadline race (mk/fuzz-one.sh).
## Targets are found with go test -list, so a new one runs without an edit.
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			echo "== $$pkg $$f"; \
			bash mk/fuzz-one.sh $(GO) $$pkg $$f $(FUZZTIME); \
		done; \
	done

include mk/windows.mk

## test-cgroup-vm: the cgroup limit tests in a QEMU VM with every cgroup v2
## controller (in CI; see .ci/test-cgroup-vm.sh).
.PHONY: test-cgroup-vm
test-cgroup-vm:
	bash .ci/test-cgroup-vm.sh
