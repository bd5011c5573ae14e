package keelson

import (
	"context"
	"iter"
)

// Page is one page of a list: its items and the cursor of the next page (nil on the last).
type Page[T any] struct {
	Items      []T
	NextCursor *string
}

// All yields every item of a list, fetching page after page: fetch asks for the page at cursor
// (nil: the first). Iteration stops at the last page, at the first error (yielded once), or when the
// loop breaks.
func All[T any](ctx context.Context, fetch func(ctx context.Context, cursor *string) (Page[T], error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var cursor *string
		for {
			page, err := fetch(ctx, cursor)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, item := range page.Items {
				if !yield(item, nil) {
					return
				}
			}
			if page.NextCursor == nil || *page.NextCursor == "" {
				return
			}
			cursor = page.NextCursor
		}
	}
}
