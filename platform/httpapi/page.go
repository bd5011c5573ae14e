package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"

	"github.com/gin-gonic/gin"
)

// Page bounds of ?limit, the same for every list.
const (
	DefaultLimit = 50
	MaxLimit     = 200
)

// Page is the pagination a list request asks for; Cursor is opaque ("" = first page).
type Page struct {
	Limit  int
	Cursor string
}

// ParsePage reads ?limit (1–200, default 50) and ?cursor; a bad limit is 400 invalid_query.
func ParsePage(c *gin.Context) (Page, error) {
	p := Page{Limit: DefaultLimit, Cursor: c.Query("cursor")}
	if raw, ok := c.GetQuery("limit"); ok {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > MaxLimit {
			return Page{}, InvalidQuery("limit", fmt.Sprintf("must be an integer between 1 and %d", MaxLimit))
		}
		p.Limit = n
	}
	return p, nil
}

// EncodeCursor makes an opaque cursor (base64url JSON) of v, e.g. the sort key of the last item.
func EncodeCursor(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Cursor values are plain structs of the module; failing to marshal one is a programming error.
		panic(fmt.Sprintf("httpapi: cursor not encodable: %v", err))
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeCursor reads a cursor made by EncodeCursor into v; "" leaves v unchanged and returns nil;
// anything not produced by EncodeCursor for this shape is 400 invalid_query.
func DecodeCursor(s string, v any) error {
	if s == "" {
		return nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return InvalidQuery("cursor", "is not a valid cursor")
	}
	// A cursor is a value of the shape EncodeCursor made (an object, or a bare id): trailing data,
	// null, a key twice or in another case, or a value the database cannot hold is not one of ours.
	if len(b) == 0 || bytes.Equal(b, []byte("null")) || CheckJSON(b) != nil || checkFieldNames(b, reflect.TypeOf(v), "") != nil {
		return InvalidQuery("cursor", "is not a valid cursor")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return InvalidQuery("cursor", "is not a valid cursor")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return InvalidQuery("cursor", "is not a valid cursor")
	}
	return nil
}

// List is the body of every list response; NextCursor is null on the last page.
type List[T any] struct {
	Items      []T     `json:"items"`
	NextCursor *string `json:"next_cursor"`
}

// NewList builds a List; next "" means there is no further page.
func NewList[T any](items []T, next string) List[T] {
	l := List[T]{Items: items}
	if next != "" {
		l.NextCursor = &next
	}
	return l
}

// MarshalJSON keeps "items" an array even when there are none.
func (l List[T]) MarshalJSON() ([]byte, error) {
	type plain List[T]
	if l.Items == nil {
		l.Items = []T{}
	}
	return json.Marshal(plain(l))
}

// Paginate runs one page of a list: it decodes the client's cursor into C, asks load for up to
// limit+1 items after it, and trims the extra one into the next cursor, made by cursorOf(last item).
func Paginate[T, C any](p Page, load func(after C, limit int) ([]T, error), cursorOf func(last T) C) ([]T, string, error) {
	var after C
	if err := DecodeCursor(p.Cursor, &after); err != nil {
		return nil, "", err
	}
	items, err := load(after, p.Limit+1)
	if err != nil {
		return nil, "", err
	}
	if len(items) <= p.Limit {
		return items, "", nil
	}
	items = items[:p.Limit]
	return items, EncodeCursor(cursorOf(items[len(items)-1])), nil
}

// ListOut is the output of a list route.
type ListOut[T any] struct {
	Body List[T]
}

// PageOf answers one page of a list: Paginate, then each item turned into its response by respond.
func PageOf[T, C, R any](p Page, load func(after C, limit int) ([]T, error), cursorOf func(last T) C, respond func(*T) R) (*ListOut[R], error) {
	items, next, err := Paginate(p, load, cursorOf)
	if err != nil {
		return nil, err
	}
	out := make([]R, len(items))
	for i := range items {
		out[i] = respond(&items[i])
	}
	return &ListOut[R]{Body: NewList(out, next)}, nil
}
