# routerd — the two commands a newcomer needs:
#   make run    the all-in-one binary in lab mode (embedded NATS + etcd, lab namespaces)
#   make test   lint, unit, component, kernel and end-to-end tests
SHELL := /bin/bash
export GOFLAGS := -buildvcs=false

# Every module of the workspace, as ./dir/... patterns.
MODULES := $(shell go list -m -f '{{.Dir}}' 2>/dev/null | sed "s|^$(CURDIR)|.|")
PKGS := $(addsuffix /...,$(MODULES))
# The race detector runs where concurrency is densest and cheapest to check:
# the gateway, the shared bus and store adapters, and the DHCP engine (lease
# group commit, listeners, events onto the bus, the service's reconfiguration
# and standby; its kernel tests drive it with real clients when run as root).
# The DHCP codec packages (v4, v6, pool, opt82, config) start no goroutines.
RACE_PKGS := ./gateway/... ./shared/... ./services/dhcp ./services/dhcp/lease ./services/dhcp/ra
# Everything but the end-to-end module, which runs last against a built binary.
UNIT_PKGS := $(filter-out ./integration/...,$(PKGS))
# Test binaries spend most of their time waiting (etcd commits, real DHCP
# clients, RA timers), so twice as many packages as CPUs run at once
# (measured on 2 CPUs: unit 31 s at -p 2, 24 s at -p 4; race 38 s -> 25 s).
TEST_P ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) * 2 )))
# Packages with tests that need a full kernel (802.1Q, QinQ, bonds): their
# TestFullKernel* tests skip on a kernel without those and run in the VM
# tier (deploy/vm: Debian's kernel under QEMU, the host's binaries over 9p).
VM_PKGS := ./services/netcfg/link/ ./services/netcfg/ ./integration/e2e/ ./services/shaper/

.PHONY: all build run run-vm test lint unit race vm e2e bench bench-dhcp deps clean openapi bench-vlan bench-subscribers

all: build

build:
	go build -o bin/routerd ./deploy/routerd

## run: start routerd in lab mode on 127.0.0.1:8880 (needs root: it builds network namespaces).
run: build
	./bin/routerd --lab --state state/lab

## deps: install the Debian packages the tests use (as root, only what is missing).
deps:
	@missing=$$(grep -v '^#' deploy/debian-packages.txt | grep -v '^$$' | while read p; do \
		dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ]; then \
			echo "installing: $$missing"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
		else echo "not root: kernel and client tests needing $$missing will skip"; fi; \
	fi

## test: everything CI runs.
test: deps lint unit race vm e2e

lint:
	@out=$$(gofmt -l $(patsubst %/...,%,$(MODULES))); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet $(PKGS)

unit:
	go test -count=1 -p $(TEST_P) -timeout 15m $(UNIT_PKGS)

race:
	go test -count=1 -p $(TEST_P) -race -timeout 10m $(RACE_PKGS)

## run-vm: the lab on a full kernel (VLANs, QinQ, bonds) in a VM, API on 127.0.0.1:8880.
run-vm: build
	deploy/vm/lab.sh

## vm: the full-kernel tests in a VM (needs root and QEMU; skipped with the reason otherwise).
vm: build
	@if [ "$$(id -u)" != 0 ]; then echo "vm: not root: full-kernel tests skipped"; \
	elif ! command -v qemu-system-x86_64 >/dev/null; then echo "vm: qemu-system-x86_64 missing (make deps): full-kernel tests skipped"; \
	else ROUTERD_BIN=$(CURDIR)/bin/routerd deploy/vm/gotest.sh $(VM_PKGS) 2>&1 | tr -d '\r' | grep -E '^(=== VM|--- |    |PASS|FAIL|ok|VM-RESULT|panic)' | grep -v 'handler.go:'; exit $${PIPESTATUS[0]}; fi

e2e: build
	ROUTERD_BIN=$(CURDIR)/bin/routerd go test -count=1 -timeout 10m ./integration/...

## bench: gateway and bus-hop benchmarks, OLT driver benchmarks; figures in the issue notes.
bench:
	go test -run '^$$' -bench . -benchtime 3s ./integration/bench/
	-go test -run '^$$' -bench . ./services/olt/...

## bench-vlan: 4,000 C-VLANs with addresses through the API, restart reconcile, against ip -batch, in the VM.
bench-vlan:
	VM_RUN='^TestFullKernelBenchVLANs$$' VM_ENV='ROUTERD_BENCH_VLANS=$(or $(VLANS),4000)' VM_TEST_TIMEOUT=30m VM_TIMEOUT=2400 VM_MEM=3072 \
		deploy/vm/gotest.sh ./services/netcfg/ 2>&1 | tr -d '\r' | grep -E '^(=== VM|--- |    vlanbench|PASS|FAIL|VM-RESULT|panic)'

## bench-dhcp: our DHCP engine against ISC Kea with perfdhcp, side by side.
bench-dhcp:
	bash integration/bench/dhcp/bench.sh

## openapi: regenerate docs/openapi.yaml from the operation table (proto/api).
openapi:
	go run ./gateway/cmd/openapi -o docs/openapi.yaml

bench-cgnat:
	cd services/cgnat && go test -run XXX -bench CGNATMap -benchtime 1x . && ROUTERD_BENCH_CGNAT=100000 go test -count=1 -run 'TestBenchCGNAT' -v .

clean:
	rm -rf bin

## bench-shaper: the shaper at 1,000 and 100,000 subscribers, full build against tc -batch, one set p50/p99, a plan of 10,000, the restart reconcile (the 100,000 builds take many minutes here).
bench-shaper:
	cd services/shaper && ROUTERD_BENCH_SHAPER=1000,100000 go test -timeout 90m -count=1 -run '^$$' -bench BenchmarkShaper -benchtime 1x -v . 2>&1 | grep -E '^(Benchmark|---|    bench_test|PASS|FAIL|ok)'

## bench-subscribers: clients through the API at 1,000 and 10,000 (CLIENTS=100000 for the larger run, about 13 minutes; CLIENTS=1000 for that size alone) with the real shaper, firewall and dhcp in namespaces: add rate, POST /clients to shaped in the kernel p50/p99, suspend, plan changes, POST /plans for one plan of all and for 10,000, GET /clients and /clients/active, reconcile, peak memory; the shaper's reshape timings and any warning are kept (about a minute at 10,000).
bench-subscribers:
	cd services/subscribers && ROUTERD_BENCH_CLIENTS=$(or $(CLIENTS),10000) go test -timeout 90m -count=1 -run '^$$' -bench '^BenchmarkClientsKernel$$' -benchtime 1x . 2>&1 | grep -E '^(Benchmark|---|PASS|FAIL|ok)|plan reshaped|effects reconciled|shaping reconciled|heap in use|level=(WARN|ERROR)'

## bench-firewall: anti-spoofing at 100,000 bindings: the rebuild and one change against nft -f and nft add element, packets per second off / 1,000 / 100,000 (about two minutes).
bench-firewall:
	cd services/firewall && go test -timeout 15m -count=1 -run '^$$' -bench BenchmarkSpoofBindings -benchtime 1x -v ./nft/ 2>&1 | grep -E '^(Benchmark|---|    spoofbench_test|PASS|FAIL|ok)'
