# syntax=docker/dockerfile:1

# Build stage: static binaries built with the flags of `make build` (tests/dockerfile_test.go checks both agree).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/keelson ./app
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/receiver ./examples/receiver

# Demo webhook receiver for docker compose: logs each delivery and whether its signature verifies.
FROM gcr.io/distroless/static-debian12:nonroot AS receiver
COPY --from=build /out/receiver /usr/local/bin/receiver
USER nonroot:nonroot
EXPOSE 9000
ENTRYPOINT ["/usr/local/bin/receiver"]

# The Keelson image (last stage, so a plain `docker build .` produces it).
FROM gcr.io/distroless/static-debian12:nonroot AS app
COPY --from=build /out/keelson /usr/local/bin/keelson
USER nonroot:nonroot
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/keelson"]
CMD ["serve"]
