# The binary, the Dockerfile and CI build the same way. VERSION, COMMIT and BUILD_DATE are stamped
# into the binary (`keelson version`, keelson_build_info); the Dockerfile takes them as build arguments.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
BUILD_DATE ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
export VERSION COMMIT BUILD_DATE
STAMP := github.com/keelson/keelson/platform/telemetry
BUILD_FLAGS := -trimpath -ldflags "-s -w -X $(STAMP).version=$${VERSION} -X $(STAMP).commit=$${COMMIT} -X $(STAMP).date=$${BUILD_DATE}"
GOLANGCI_LINT_VERSION := v2.15.0
GOVULNCHECK_VERSION := v1.9.0

.PHONY: run build migrate serve test test-helm test-pgbouncer allocs fuzz tidy-check vuln lint bench fmt services screenshots test-compose test-compose-cluster test-compose-pgbouncer

## services: install (when missing) and start PostgreSQL and RabbitMQ on 127.0.0.1
services:
	@bash scripts/services.sh

## run: start the services if needed, migrate the database, then serve
run: services build
	./bin/keelson migrate && ./bin/keelson serve

## build: a static, stripped bin/keelson (the same command as the Dockerfile's)
build:
	@echo "building bin/keelson $(VERSION): static (CGO_ENABLED=0), -trimpath, stripped (-s -w)"
	CGO_ENABLED=0 go build $(BUILD_FLAGS) -o bin/keelson ./app

migrate: build
	./bin/keelson migrate

## test: the whole suite against the real PostgreSQL and RabbitMQ, with the race detector
test: services tidy-check
	go vet ./...
	go test -race -count=1 -timeout 30m ./...
	$(MAKE) allocs
	$(MAKE) fuzz
	$(MAKE) test-pgbouncer
	@# sdk/go is its own module (oapi-codegen's runtime stays out of go.mod): its tests start keelson serve.
	cd sdk/go && go vet ./... && go test -race -count=1 -timeout 10m ./...
	$(MAKE) test-helm

## test-helm: deploy/helm/keelson rendered by helm's Go packages for the default and production
## values, every object decoded strictly into the Kubernetes API types (deploy/helm/test, a module
## of its own so helm stays out of go.mod); app/helmchart_test.go keeps the chart's settings `keelson env`'s.
test-helm:
	cd deploy/helm/test && go vet ./... && go test -count=1 -timeout 10m ./...

## allocs: the tests that count allocations, without the race detector (it makes sync.Pool drop items)
allocs:
	go test -count=1 -run 'Allocates' ./...

## test-pgbouncer: the webhook delivery flows, the job tests and a two-replica black-box fan-out, each
## test database behind a PgBouncer in transaction mode that the test starts (docs/operations.md#pgbouncer)
test-pgbouncer:
	KEELSON_TEST_PGBOUNCER=1 go test -count=1 -timeout 20m -run 'TestEventsFanOut|TestIntegrationEvents|TestAReceiver|TestAnAlways|TestAnOutcome' ./modules/webhooks/
	KEELSON_TEST_PGBOUNCER=1 go test -count=1 -timeout 20m ./platform/jobs/
	KEELSON_TEST_PGBOUNCER=1 go test -count=1 -timeout 20m -run 'TestEventsFanOutAcrossReplicasWithVerifiedSignatures' ./tests/

## fuzz: each JSON request-body fuzz target for FUZZTIME inputs (5000x, 15–20 s here); any 5xx fails; and the
## subscription filter's: refused with a position, or evaluated within its cost limit.
## A count, not a duration: Go 1.26's fuzz coordinator can fail a target with a bare
## "context deadline exceeded" when a duration ends while a loaded worker is still busy.
FUZZTIME ?= 5000x
fuzz:
	go test -run '^$$' -fuzz '^FuzzPublishEventNeverAnswers5xx$$' -fuzztime $(FUZZTIME) -parallel 2 ./modules/webhooks
	go test -run '^$$' -fuzz '^FuzzCreateSubscriptionNeverAnswers5xx$$' -fuzztime $(FUZZTIME) -parallel 2 ./modules/webhooks
	go test -run '^$$' -fuzz '^FuzzAFilterIsRefusedWithAPositionOrEvaluatesWithinItsCost$$' -fuzztime $(FUZZTIME) -parallel 2 ./modules/webhooks
	go test -run '^$$' -fuzz '^FuzzPostMessageNeverAnswers5xx$$' -fuzztime $(FUZZTIME) -parallel 2 ./modules/conversations

## tidy-check: fail when `go mod tidy` would change go.mod or go.sum
tidy-check:
	@go mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy and commit the result" >&2; exit 1; }
	@# bench/jobs is its own module (it pulls River in); it builds against this tree, so it drifts with it.
	@cd bench/jobs && go mod tidy -diff || { echo "bench/jobs/go.mod/go.sum are not tidy: run go mod tidy there and commit the result" >&2; exit 1; }
	@cd sdk/go && go mod tidy -diff || { echo "sdk/go/go.mod/go.sum are not tidy: run go mod tidy there and commit the result" >&2; exit 1; }
	@cd deploy/helm/test && go mod tidy -diff || { echo "deploy/helm/test/go.mod/go.sum are not tidy: run go mod tidy there and commit the result" >&2; exit 1; }

## vuln: govulncheck against vuln.go.dev (needs that network access; CI has none, so it is not part of test)
vuln:
	go run golang.org/x/vuln/cmd/govulncheck@$(GOVULNCHECK_VERSION) ./...

## test-compose: docker-compose.yml built, walked through and faulted in containers, then the cluster
## profile with one broker node stopped, then the pgbouncer profile carrying 100 events (needs Docker and Compose; builds test-only stand-in images
## from Debian packages, as CI has no image registry; the second test reuses the first's images).
## COMPOSE_TEST_TIMEOUT bounds both: room for a slow mirror's stand-in build inside .ci/run's 45 minutes
## (the suite takes about 10 of them on CI's machine, set-up a few).
COMPOSE_TEST_TIMEOUT ?= 25m
test-compose:
	go test -tags compose -count=1 -timeout $(COMPOSE_TEST_TIMEOUT) -v \
		-run 'TestTheComposeFileRunsTheAppAndLosesNoEventUnderFaults|TestAStoppedBrokerNodeOfTheClusterLosesNoEvent|TestThePgBouncerProfileDeliversEveryEventOnce' ./tests/compose/

## test-compose-pgbouncer: only the pgbouncer profile (migration and replicas through PgBouncer in transaction mode)
test-compose-pgbouncer:
	go test -tags compose -count=1 -timeout $(COMPOSE_TEST_TIMEOUT) -v -run 'TestThePgBouncerProfileDeliversEveryEventOnce' ./tests/compose/

## test-compose-cluster: only the cluster profile (three RabbitMQ nodes, quorum queues) with one node stopped
test-compose-cluster:
	go test -tags compose -count=1 -timeout $(COMPOSE_TEST_TIMEOUT) -v -run 'TestAStoppedBrokerNodeOfTheClusterLosesNoEvent' ./tests/compose/

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

## screenshots: PNGs of the console's main pages into docs/images (needs chromium, PostgreSQL, RabbitMQ)
screenshots: services
	CONSOLE_SCREENSHOTS=$(CURDIR)/docs/images go test -count=1 -run 'Photographed' ./console/
