// Package keelson is a Go client of Keelson's HTTP API, generated from the OpenAPI document the server
// serves (openapi.json here, keelson.gen.go), plus what a generator cannot write: verifying the
// signature of a received webhook (Verifier) and walking a list page after page (All).
package keelson

//go:generate go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2 -config oapi-codegen.yaml openapi.json
