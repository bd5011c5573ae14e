package console_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/keelson/keelson/platform/host/hosttest"
)

func TestATokenThatMayOnlyReadConversationsSeesNoFormToCreateOrPost(t *testing.T) {
	c := startCluster(t)
	res := c.a.Do(t, http.MethodPost, "/api/v1/admin/tokens", map[string]any{"scopes": []string{"conversations:read"}})
	if res.Status != http.StatusCreated {
		t.Fatalf("token: %d %s", res.Status, res.Body)
	}
	reader := hosttest.Decode[struct {
		Token string `json:"token"`
	}](t, res).Token
	conv := hosttest.Decode[created](t, c.a.Do(t, http.MethodPost, "/api/v1/conversations", map[string]any{"title": "Refund"}))

	w := newWebClient(t)
	w.signIn(c.a.URL, reader)
	list := w.send(http.MethodGet, c.a.URL+"/console/conversations", nil)
	if list.status != http.StatusOK || !strings.Contains(list.body, "Refund") || strings.Contains(list.body, `id="create-conversation"`) {
		t.Fatalf("the list (%d) offers a create form to a reading token:\n%s", list.status, list.body)
	}
	one := w.send(http.MethodGet, c.a.URL+"/console/conversations/"+conv.ID, nil)
	if one.status != http.StatusOK || strings.Contains(one.body, `id="post-message"`) {
		t.Fatalf("the conversation (%d) offers a message form to a reading token:\n%s", one.status, one.body)
	}

	// The operator's token still sees both.
	admin := newWebClient(t)
	admin.signIn(c.a.URL, hosttest.Token)
	if res := admin.send(http.MethodGet, c.a.URL+"/console/conversations/"+conv.ID, nil); !strings.Contains(res.body, `id="post-message"`) {
		t.Fatal("the operator sees no message form")
	}
}
