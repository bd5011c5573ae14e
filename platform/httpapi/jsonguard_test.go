package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/platform/httpapi"
)

func TestCheckJSONNamesTheFirstValueThatCannotBeStored(t *testing.T) {
	deep := strings.Repeat(`{"a":`, httpapi.MaxJSONDepth) + "1" + strings.Repeat("}", httpapi.MaxJSONDepth)
	tooDeep := strings.Repeat("[", httpapi.MaxJSONDepth+1) + strings.Repeat("]", httpapi.MaxJSONDepth+1)
	tests := []struct {
		name  string
		doc   string
		field string // "" = storable
	}{
		{"plain object", `{"a":"x","b":[1,2.5,-3e10,true,null],"c":{}}`, ""},
		{"escaped text and a surrogate pair", `{"a":"tab\t \"q\" \u00e9 \ud83d\ude00 \/"}`, ""},
		{"UTF-8 text", `{"a":"żółw 🐢"}`, ""},
		{"nesting at the limit", deep, ""},
		{"large but finite numbers", `{"a":1e308,"b":-1.7976931348623157e308,"c":5e-324,"d":0e-999999}`, ""},
		{"NUL escape in data", `{"data":{"note":"a\u0000b"}}`, "data.note"},
		{"NUL escape in a key", `{"data":{"k\u0000":1}}`, "data"},
		{"lone high surrogate", `{"title":"x\ud800y"}`, "title"},
		{"lone low surrogate", `{"title":"\udc00"}`, "title"},
		{"high surrogate then a non-surrogate escape", `{"title":"\ud800\u0041"}`, "title"},
		{"invalid UTF-8", "{\"content\":\"a\xffb\"}", "content"},
		{"truncated UTF-8 sequence", "{\"content\":\"\xe2\x82\"}", "content"},
		{"number beyond a double", `{"data":{"n":1e1000000}}`, "data.n"},
		{"negative number beyond a double", `{"data":{"list":[1,-2e309]}}`, "data.list[1]"},
		{"non-zero number that rounds to zero", `{"data":{"n":1e-1000000}}`, "data.n"},
		{"nesting past the limit", `{"data":` + tooDeep + `}`, "data" + strings.Repeat("[0]", httpapi.MaxJSONDepth-1)},
		{"top-level scalar", `"\u0000"`, "body"},
		{"not JSON at all", `{"a":`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fe := httpapi.CheckJSON([]byte(tc.doc))
			if tc.field == "" {
				assert.Nil(t, fe)
				return
			}
			require.NotNil(t, fe)
			assert.Equal(t, tc.field, fe.Field)
			assert.NotEmpty(t, fe.Message)
		})
	}
}

func TestUnstorableBodiesAreRefusedBeforeTheHandlerRuns(t *testing.T) {
	handled := 0
	srv := newServerWithRoutes(t, func(api *gin.RouterGroup) {
		api.POST("/notes", httpapi.H(func(c *gin.Context) error {
			var in struct {
				Note string         `json:"note"`
				Data map[string]any `json:"data"`
			}
			if err := httpapi.BindJSON(c, &in); err != nil {
				return err
			}
			handled++
			c.Status(http.StatusCreated)
			return nil
		}))
	})
	jsonType := map[string]string{"Content-Type": "application/json"}

	res := srv.do(t, http.MethodPost, "/api/v1/notes", token, strings.NewReader(`{"data":{"x":"\u0000"}}`), jsonType)
	assert.Equal(t, http.StatusUnprocessableEntity, res.status, string(res.body))
	assert.Equal(t, httpapi.CodeValidationFailed, res.problem.Code)
	require.Len(t, res.problem.Errors, 1)
	assert.Equal(t, "data.x", res.problem.Errors[0].Field)

	res = srv.do(t, http.MethodPost, "/api/v1/notes", token, strings.NewReader("{\"note\":\"\xc3\"}"), jsonType)
	assert.Equal(t, http.StatusUnprocessableEntity, res.status)
	assert.Equal(t, "note", res.problem.Errors[0].Field)
	assert.Zero(t, handled, "no refused body reached the handler")

	// Unauthenticated requests learn nothing about their body, and malformed JSON is still the binder's 400.
	res = srv.do(t, http.MethodPost, "/api/v1/notes", "", strings.NewReader(`{"note":"\u0000"}`), jsonType)
	assert.Equal(t, http.StatusUnauthorized, res.status)
	res = srv.do(t, http.MethodPost, "/api/v1/notes", token, strings.NewReader(`{"note":`), jsonType)
	assert.Equal(t, http.StatusBadRequest, res.status)
	assert.Equal(t, httpapi.CodeMalformedJSON, res.problem.Code)

	res = srv.do(t, http.MethodPost, "/api/v1/notes", token, strings.NewReader(`{"note":"fine","data":{"n":1.5}}`), jsonType)
	assert.Equal(t, http.StatusCreated, res.status, string(res.body))
	assert.Equal(t, 1, handled)
}
