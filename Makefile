# agentproc: the commands the README documents.
GO ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
BENCHCOUNT ?= 5
STRESSCOUNT ?= 3
# STRESSBURNERS: how many CPU burners run beside make stress; empty means
# one per online CPU, which is Go's default GOMAXPROCS.
STRESSBURNERS ?=

.PHONY: all test stress bench lint cross fuzz

all: lint cross test

## test: the whole suite with the race detector.
test:
	$(GO) test -race -count=1 -timeout 15m ./...

## stress: the whole suite with the race detector, STRESSCOUNT times, while
## one CPU burner per online CPU runs beside it. The burners are started and
## killed here, by PID, whether the tests pass, fail or are interrupted.
stress:
	@n=$(STRESSBURNERS); n=$${n:-$$(getconf _NPROCESSORS_ONLN)}; pids=; \
	trap 'kill $$pids 2>/dev/null; wait $$pids 2>/dev/null' EXIT; trap 'exit 130' INT; trap 'exit 143' TERM; \
	i=0; while [ $$i -lt $$n ]; do yes >/dev/null & pids="$$pids $$!"; i=$$((i+1)); done; \
	echo "stress: $$n CPU burners (PIDs$$pids) beside go test -race -count=$(STRESSCOUNT)"; \
	start=$$(date +%s); \
	$(GO) test -race -count=$(STRESSCOUNT) -timeout 30m ./...; st=$$?; \
	echo "stress: go test exit $$st after $$(( $$(date +%s) - start ))s"; \
	exit $$st

## bench: agentproc against plain os/exec in the same run, with ratios.
bench:
	@mkdir -p build
	$(GO) test -run '^$$' -bench . -benchmem -count $(BENCHCOUNT) -timeout 60m ./... | tee build/bench.txt
	$(GO) run ./internal/benchratio < build/bench.txt

## lint: vet, gofmt, staticcheck and a tidy go.mod.
lint:
	$(GO) vet ./...
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) run $(STATICCHECK) ./...
	$(GO) mod tidy -diff

## cross: vet for the other platforms the package supports.
cross:
	GOOS=windows $(GO) vet ./...
	GOOS=darwin $(GO) vet ./...
	GOOS=freebsd $(GO) vet ./...

## fuzz: a short run of each fuzz target.
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzBuffer$$' -fuzztime 30s .
	$(GO) test -run '^$$' -fuzz '^FuzzAnalyzeCommand$$' -fuzztime 30s .
	$(GO) test -run '^$$' -fuzz '^FuzzPlainText$$' -fuzztime 30s .

include mk/windows.mk

## test-cgroup-vm: the cgroup limit tests in a QEMU VM with every cgroup v2
## controller (not in CI; see .ci/test-cgroup-vm.sh).
.PHONY: test-cgroup-vm
test-cgroup-vm:
	bash .ci/test-cgroup-vm.sh
