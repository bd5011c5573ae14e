// Package correlation carries the request id through contexts, logs and integration events.
package correlation

import "context"

type key struct{}

// With returns ctx carrying id.
func With(ctx context.Context, id string) context.Context { return context.WithValue(ctx, key{}, id) }

// ID returns the correlation id carried by ctx, or "".
func ID(ctx context.Context) string {
	id, _ := ctx.Value(key{}).(string)
	return id
}
