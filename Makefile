# agentproc: the commands the README documents.
GO ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
BENCHCOUNT ?= 5

.PHONY: all test bench lint cross fuzz

all: lint cross test

## test: the whole suite with the race detector.
test:
	$(GO) test -race -count=1 -timeout 15m ./...

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
