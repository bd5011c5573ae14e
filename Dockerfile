# Base images are build arguments so a machine without a registry can build from local stand-ins
# (docker-compose.yml passes them on); the defaults are the upstream images users pull. No BuildKit-only
# syntax: the legacy builder and Compose v1 build this file too.
ARG GO_IMAGE=golang:1.26.8-bookworm
ARG RUNTIME_IMAGE=gcr.io/distroless/static-debian12:nonroot

# Build stage: static binaries built with the flags of `make build` (tests/dockerfile_test.go checks both agree).
FROM ${GO_IMAGE} AS build
# GOFLAGS=-mod=vendor GOPROXY=off build from a vendored context without the network.
ARG GOFLAGS
ARG GOPROXY
ENV GOTOOLCHAIN=local
WORKDIR /src
COPY go.mod go.sum ./
RUN if [ "$GOPROXY" != off ]; then go mod download; fi
COPY . .
# Stamped into the binary (`keelson version`); the context has no .git, so pass them:
# docker build --build-arg VERSION=$(git describe --tags --always) --build-arg COMMIT=$(git rev-parse HEAD) --build-arg BUILD_DATE=$(date -u +%Y-%m-%dT%H:%M:%SZ) .
ARG VERSION
ARG COMMIT
ARG BUILD_DATE
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/keelson/keelson/platform/telemetry.version=${VERSION} -X github.com/keelson/keelson/platform/telemetry.commit=${COMMIT} -X github.com/keelson/keelson/platform/telemetry.date=${BUILD_DATE}" -o /out/keelson ./app
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/keelson/keelson/platform/telemetry.version=${VERSION} -X github.com/keelson/keelson/platform/telemetry.commit=${COMMIT} -X github.com/keelson/keelson/platform/telemetry.date=${BUILD_DATE}" -o /out/receiver ./examples/receiver

# Demo webhook receiver for docker compose: logs each delivery and whether its signature verifies.
FROM ${RUNTIME_IMAGE} AS receiver
COPY --from=build /out/receiver /usr/local/bin/receiver
# distroless's nonroot user, by number: the image needs no passwd entry for it.
USER 65532:65532
EXPOSE 9000
ENTRYPOINT ["/usr/local/bin/receiver"]

# The Keelson image (last stage, so a plain `docker build .` produces it).
FROM ${RUNTIME_IMAGE} AS app
COPY --from=build /out/keelson /usr/local/bin/keelson
USER 65532:65532
EXPOSE 8080
# No shell or curl in the image: the binary checks its own /readyz.
HEALTHCHECK --interval=5s --timeout=4s --start-period=30s --retries=6 CMD ["/usr/local/bin/keelson", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/keelson"]
CMD ["serve"]
