package httpapi_test

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/platform/httpapi"
)

type hookIn struct {
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers,omitempty"`
	Data    map[string]any    `json:"data,omitempty"`
	Rules   []struct {
		Type string `json:"type"`
	} `json:"rules,omitempty"`
}

func TestDuplicateAndCaseVariantKeysAre422NamingTheFieldAndReachNoHandler(t *testing.T) {
	handled := 0
	srv := newServerWithRoutes(t, func(api *gin.RouterGroup) {
		api.POST("/hooks", httpapi.H(func(c *gin.Context) error {
			var in hookIn
			if err := httpapi.BindJSON(c, &in); err != nil {
				return err
			}
			handled++
			c.JSON(http.StatusCreated, in)
			return nil
		}))
	})
	tests := []struct {
		name, body, field string
	}{
		{"the same key twice", `{"url":"http://a","url":"http://b"}`, "url"},
		{"a key in two cases", `{"url":"http://a","URL":"http://b"}`, "url"},
		{"a key in two cases, the other first", `{"URL":"http://b","url":"http://a"}`, "url"},
		{"a key only in another case", `{"Url":"http://a"}`, "Url"},
		{"a nested key in another case", `{"url":"http://a","rules":[{"type":"x"},{"TYPE":"y"}]}`, "rules[1].TYPE"},
		{"a key twice inside free-form data", `{"url":"http://a","data":{"n":1,"n":2}}`, "data.n"},
		{"a header twice", `{"url":"http://a","headers":{"X-A":"1","X-A":"2"}}`, "headers.X-A"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := srv.do(t, http.MethodPost, "/api/v1/hooks", token, strings.NewReader(tc.body),
				map[string]string{"Content-Type": "application/json"})
			require.Equal(t, http.StatusUnprocessableEntity, r.status, string(r.body))
			assert.Equal(t, "application/problem+json", r.header.Get("Content-Type"))
			assert.Equal(t, httpapi.CodeValidationFailed, r.problem.Code)
			require.Len(t, r.problem.Errors, 1, string(r.body))
			assert.Equal(t, tc.field, r.problem.Errors[0].Field)
		})
	}
	assert.Zero(t, handled, "no ambiguous body reached the handler")

	// Keys differing in case are distinct where the API keeps them as given: free-form data and header names.
	r := srv.do(t, http.MethodPost, "/api/v1/hooks", token,
		strings.NewReader(`{"url":"http://a","data":{"n":1,"N":2},"headers":{"X-A":"1","x-a":"2"}}`),
		map[string]string{"Content-Type": "application/json"})
	assert.Equal(t, http.StatusCreated, r.status, string(r.body))
}

type itemCursor struct {
	At time.Time `json:"at"`
	ID uuid.UUID `json:"id"`
}

func TestAMalformedCursorIs400NamingTheCursor(t *testing.T) {
	srv := newServerWithRoutes(t, func(api *gin.RouterGroup) {
		api.GET("/items", httpapi.H(func(c *gin.Context) error {
			p, err := httpapi.ParsePage(c)
			if err != nil {
				return err
			}
			var after itemCursor
			if err := httpapi.DecodeCursor(p.Cursor, &after); err != nil {
				return err
			}
			c.JSON(http.StatusOK, after)
			return nil
		}))
	})
	good := httpapi.EncodeCursor(itemCursor{At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), ID: uuid.New()})
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	id := uuid.NewString()
	bad := map[string]string{
		"not base64":            "a.b!",
		"padded base64":         good + "==",
		"not JSON":              enc(`{"at":`),
		"null":                  enc(`null`),
		"an array":              enc(`[1]`),
		"a string":              enc(`"x"`),
		"trailing data":         enc(`{"id":"` + id + `"}{"id":"` + id + `"}`),
		"an unknown field":      enc(`{"id":"` + id + `","x":1}`),
		"a key twice":           enc(`{"id":"` + id + `","id":"` + uuid.NewString() + `"}`),
		"a key in another case": enc(`{"ID":"` + id + `"}`),
		"a malformed id":        enc(`{"id":"nope"}`),
		"a malformed time":      enc(`{"at":"yesterday"}`),
		"a NUL in a string":     enc(`{"at":"\u0000"}`),
		"a wrong type":          enc(`{"id":42}`),
	}
	for name, cursor := range bad {
		t.Run(name, func(t *testing.T) {
			r := srv.do(t, http.MethodGet, "/api/v1/items?cursor="+cursor, token, nil, nil)
			require.Equal(t, http.StatusBadRequest, r.status, string(r.body))
			assert.Equal(t, httpapi.CodeInvalidQuery, r.problem.Code)
			require.Len(t, r.problem.Errors, 1)
			assert.Equal(t, "cursor", r.problem.Errors[0].Field)
		})
	}
	r := srv.do(t, http.MethodGet, "/api/v1/items?cursor="+good, token, nil, nil)
	assert.Equal(t, http.StatusOK, r.status, string(r.body))
}

func TestACursorThatIsABareIDRoundTrips(t *testing.T) {
	id := uuid.New()
	var after uuid.UUID
	require.NoError(t, httpapi.DecodeCursor(httpapi.EncodeCursor(id), &after))
	assert.Equal(t, id, after)
	for _, bad := range []string{`null`, `"nope"`, `{"id":"` + id.String() + `"}`} {
		assert.Error(t, httpapi.DecodeCursor(base64.RawURLEncoding.EncodeToString([]byte(bad)), &after), bad)
	}
}
