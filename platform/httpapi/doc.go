// Package httpapi is the HTTP platform: the gin engine with its middleware (request id, access log,
// recovery, body limit, bearer auth, metrics), the one mapping of errors to RFC 9457 problem+json,
// the operations endpoints, the OpenAPI document, and the helpers module handlers use
// (H, BindJSON, PathUUID, IfMatch, SetETag, ParsePage, cursors, List).
package httpapi
