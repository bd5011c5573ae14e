# The binary, the Dockerfile and CI build the same way.
BUILD_FLAGS := -trimpath -ldflags "-s -w"
GOLANGCI_LINT_VERSION := v2.15.0

.PHONY: run build migrate serve test lint bench fmt services

## services: install (when missing) and start PostgreSQL and RabbitMQ on 127.0.0.1
services:
	@bash scripts/services.sh

## run: start the services if needed, migrate the database, then serve
run: services build
	./bin/keelson migrate && ./bin/keelson serve

build:
	CGO_ENABLED=0 go build $(BUILD_FLAGS) -o bin/keelson ./app

migrate: build
	./bin/keelson migrate

## test: the whole suite against the real PostgreSQL and RabbitMQ, with the race detector
test: services
	go vet ./...
	go test -race -count=1 -timeout 30m ./...

lint:
	@command -v golangci-lint >/dev/null || go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	golangci-lint run ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

## bench: the benchmarks of docs/performance.md (about 10 minutes; needs pgbench)
bench:
	go run ./bench/outbox
	cd bench/jobs && go run . -rounds 3
	go run ./bench/webhooks -events 5000 -fanout 10 -for 20s
