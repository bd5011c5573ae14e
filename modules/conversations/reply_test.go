package conversations_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/modules/conversations"
	"github.com/keelson/keelson/modules/conversations/assistant"
	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/host/hosttest"
	"github.com/keelson/keelson/platform/jobs"
	"github.com/keelson/keelson/platform/module"
	"github.com/keelson/keelson/platform/outbox"
)

// Model behaviours of the fake chat-completions server.
const (
	modelAnswers = iota // 200 with a reply and a rename tool call
	modelFails          // 500
	modelHangs          // no answer until the client gives up
)

// fakeModel speaks the OpenAI chat-completions API on loopback.
type fakeModel struct {
	*httptest.Server
	mode     atomic.Int32
	requests atomic.Int32
	arrived  chan struct{} // one value per request, never blocks the handler
}

func newFakeModel(t *testing.T, mode int32) *fakeModel {
	f := &fakeModel{arrived: make(chan struct{}, 100)}
	f.mode.Store(mode)
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.requests.Add(1)
		select {
		case f.arrived <- struct{}{}:
		default:
		}
		if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer sk-fake" {
			http.Error(w, "wrong path or key", http.StatusNotFound)
			return
		}
		var req struct {
			Model string `json:"model"`
			Tools []any  `json:"tools"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model != "fake-model" || len(req.Tools) != 2 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		switch f.mode.Load() {
		case modelFails:
			http.Error(w, `{"error":{"message":"the model is overloaded"}}`, http.StatusInternalServerError)
		case modelHangs:
			select {
			case <-r.Context().Done():
			case <-time.After(30 * time.Second):
			}
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"id":"chatcmpl-1","object":"chat.completion","model":"fake-model","choices":[{"index":0,
				"finish_reason":"tool_calls","message":{"role":"assistant","content":"Renaming as you asked.",
				"tool_calls":[{"id":"call_1","type":"function","function":{"name":"rename_conversation","arguments":"{\"title\":\"Named by the model\"}"}}]}}]}`))
		}
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeModel) config(timeout time.Duration) conversations.Config {
	return conversations.Config{OpenAI: assistant.OpenAIConfig{
		BaseURL: f.URL + "/v1", Model: "fake-model", APIKey: "sk-fake", Timeout: timeout,
	}}
}

// TestModelToolCallBecomesProposal: the OpenAI-compatible adapter's tool call becomes a pending proposal.
func TestModelToolCallBecomesProposal(t *testing.T) {
	h := newHarness(t)
	model := newFakeModel(t, modelAnswers)
	r := h.start(harnessOptions{background: true, conversations: model.config(5 * time.Second)})
	c := createConversation(t, r, "Model chat")
	postMessage(t, r, c.ID, "please give this a better name")

	msgs := waitForReply(t, r, c.ID, 2)
	assert.Equal(t, "Renaming as you asked.", msgs[1].Content)
	p := waitForProposals(t, r, c.ID, 1)[0]
	assert.Equal(t, "pending", p.Status)
	assert.Equal(t, "rename_conversation", p.Action.Type)
	assert.JSONEq(t, `{"title":"Named by the model"}`, string(p.Action.Params))
	assert.Contains(t, p.Rationale, "rename_conversation")

	require.Equal(t, http.StatusOK, r.Do(t, http.MethodPost, proposalsPath+"/"+p.ID+"/accept", nil).Status)
	waitForProposalStatus(t, r, p.ID, "applied")
	assert.Equal(t, "Named by the model", hosttest.Decode[conversationBody](t, r.Do(t, http.MethodGet, conversationsPath+"/"+c.ID, nil)).Title)
}

// TestModelFailureRetriesTheJob: a 500 or a timeout of the model fails the reply job, which is
// retried by the jobs platform; the message request itself succeeded at once.
func TestModelFailureRetriesTheJob(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mode      int32
		lastError string
	}{
		{"500", modelFails, "status 500"},
		{"timeout", modelHangs, "Timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			model := newFakeModel(t, tc.mode)
			cfg := model.config(300 * time.Millisecond)
			// Five attempts with retries of at most 500 ms run out in about two seconds: a loaded machine could
			// see the failures, then switch the model on after the last attempt. The job must outlast the test.
			cfg.ReplyMaxAttempts = 1000
			r := h.start(harnessOptions{background: true, conversations: cfg})
			c := createConversation(t, r, "Flaky model")

			started := time.Now()
			m := postMessage(t, r, c.ID, "hello?")
			assert.Less(t, time.Since(started), 5*time.Second, "the request does not wait for the model")

			var lastError string
			hosttest.Eventually(t, flowTimeout, func() bool {
				var row struct {
					Attempt   int
					Status    string
					LastError *string
				}
				require.NoError(t, r.db.Gorm().Raw(`SELECT attempt, status, last_error FROM jobs WHERE payload->>'message_id' = ?`, m.ID).Scan(&row).Error)
				if row.LastError != nil {
					lastError = *row.LastError
				}
				return row.Attempt >= 2 && row.Status == "pending" && row.LastError != nil
			}, "the reply job failed twice and waits for a retry")
			assert.Contains(t, lastError, tc.lastError)
			assert.GreaterOrEqual(t, model.requests.Load(), int32(2))
			assert.Equal(t, int64(0), hosttest.Count(t, r.db, `SELECT count(*) FROM conversation_messages WHERE role = 'assistant'`))

			model.mode.Store(modelAnswers)
			msgs := waitForReply(t, r, c.ID, 2)
			assert.Equal(t, "assistant", msgs[1].Role)
			hosttest.Eventually(t, flowTimeout, func() bool {
				return hosttest.Count(t, r.db, `SELECT count(*) FROM jobs WHERE payload->>'message_id' = ? AND status = 'completed'`, m.ID) == 1
			}, "the job completed")
			assert.Equal(t, int64(1), hosttest.Count(t, r.db, `SELECT count(*) FROM conversation_messages WHERE role = 'assistant'`))
		})
	}
}

const childDBEnv, childModelEnv = "KEELSON_REPLY_CHILD_DB_URL", "KEELSON_REPLY_CHILD_MODEL_URL"

// TestReplyWorkerKilledMidRun: a child process claims the reply job and is SIGKILLed while the
// model is answering; after its lease expires another worker runs the job: exactly one reply.
func TestReplyWorkerKilledMidRun(t *testing.T) {
	if os.Getenv(childDBEnv) != "" {
		t.Skip("inside the child process")
	}
	h := newHarness(t)
	model := newFakeModel(t, modelHangs)
	r := h.start(harnessOptions{}) // HTTP only: the child is the only worker at first
	c := createConversation(t, r, "Crash")
	m := postMessage(t, r, c.ID, "answer me once")

	child := exec.Command(os.Args[0], "-test.run=^TestReplyWorkerChild$", "-test.count=1")
	child.Env = append(os.Environ(), childDBEnv+"="+h.db.URL, childModelEnv+"="+model.URL)
	child.Stdout, child.Stderr = os.Stderr, os.Stderr
	require.NoError(t, child.Start())
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = child.Process.Kill()
			_ = child.Wait()
		}
	})
	select {
	case <-model.arrived:
	case <-time.After(60 * time.Second):
		t.Fatal("the child never called the model")
	}
	var claimedBy string
	require.NoError(t, r.db.Gorm().Raw(`SELECT claimed_by FROM jobs WHERE payload->>'message_id' = ? AND status = 'processing'`, m.ID).Scan(&claimedBy).Error)
	assert.Equal(t, "reply-child", claimedBy, "the child holds the claim mid-run")

	require.NoError(t, child.Process.Kill()) // SIGKILL: no release, no completion
	_ = child.Wait()
	killed = true
	model.mode.Store(modelAnswers)

	h.start(harnessOptions{background: true, conversations: model.config(5 * time.Second)})
	waitForReply(t, r, c.ID, 2)
	hosttest.Eventually(t, flowTimeout, func() bool {
		return hosttest.Count(t, r.db, `SELECT count(*) FROM jobs WHERE payload->>'message_id' = ? AND status = 'completed'`, m.ID) == 1
	}, "the job completed elsewhere")
	assert.Equal(t, int64(1), hosttest.Count(t, r.db, `SELECT count(*) FROM conversation_messages WHERE role = 'assistant' AND source_message_id = ?`, m.ID))
	assert.Equal(t, int32(2), model.requests.Load(), "the killed attempt and the one that answered")
	var attempt int
	require.NoError(t, r.db.Gorm().Raw(`SELECT attempt FROM jobs WHERE payload->>'message_id' = ?`, m.ID).Scan(&attempt).Error)
	assert.Equal(t, 2, attempt)
}

// TestReplyWorkerChild is the worker process of TestReplyWorkerKilledMidRun; it runs until killed.
func TestReplyWorkerChild(t *testing.T) {
	url := os.Getenv(childDBEnv)
	if url == "" {
		t.Skip("helper process of TestReplyWorkerKilledMidRun")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, err := database.Open(ctx, database.Config{URL: url})
	require.NoError(t, err)
	pub, err := outbox.NewPublisher(db, nil)
	require.NoError(t, err)
	client, err := jobs.NewClient(db)
	require.NoError(t, err)
	logger := hosttest.Logger()
	registry := module.NewRegistry(module.Deps{DB: db, Events: pub, Jobs: client, Logger: logger, Metrics: prometheus.NewRegistry(), InstanceID: "reply-child"})
	m, err := conversations.New(conversations.Config{OpenAI: assistant.OpenAIConfig{
		BaseURL: os.Getenv(childModelEnv) + "/v1", Model: "fake-model", APIKey: "sk-fake", Timeout: time.Minute,
	}})
	require.NoError(t, err)
	require.NoError(t, m.Register(registry.For(m)))
	runner, err := jobs.NewRunner(db, jobs.Config{InstanceID: "reply-child", Lease: time.Second, PollInterval: 50 * time.Millisecond, DepthInterval: -1},
		registry.JobKinds(), nil, logger, prometheus.NewRegistry())
	require.NoError(t, err)
	_ = runner.Run(ctx)
}

// TestReplyJobRunTwiceRepliesOnce runs the same reply job concurrently and repeatedly, as a job
// platform may after a lost lease: one reply row and one reply event.
func TestReplyJobRunTwiceRepliesOnce(t *testing.T) {
	h := newHarness(t)
	r := h.start(harnessOptions{})
	c := createConversation(t, r, "Twice")
	m := postMessage(t, r, c.ID, "/rename Once")
	var kind jobs.Kind
	registry := module.NewRegistry(module.Deps{DB: r.db, Events: mustPublisher(t, r.db), Jobs: mustClient(t, r.db), Logger: hosttest.Logger(), Metrics: prometheus.NewRegistry()})
	mod, err := conversations.New(conversations.Config{})
	require.NoError(t, err)
	require.NoError(t, mod.Register(registry.For(mod)))
	for _, k := range registry.JobKinds() {
		if k.Name == conversations.KindAssistantReply {
			kind = k
		}
	}
	require.NotNil(t, kind.Handle)
	payload, _ := json.Marshal(map[string]string{"message_id": m.ID})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			assert.NoError(t, kind.Handle(tenantContext(), jobs.Job{Kind: kind.Name, Payload: payload, Attempt: 1, MaxAttempts: 5}))
		})
	}
	wg.Wait()
	require.NoError(t, kind.Handle(tenantContext(), jobs.Job{Kind: kind.Name, Payload: payload, Attempt: 2, MaxAttempts: 5}))
	assert.Equal(t, int64(1), hosttest.Count(t, r.db, `SELECT count(*) FROM conversation_messages WHERE source_message_id = ?`, m.ID))
	assert.Equal(t, int64(1), outboxCount(t, r.db, "assistant.reply_created"))
	assert.Equal(t, int64(2), outboxCount(t, r.db, "conversation.message.created"), "the question and one answer")
}

func mustPublisher(t *testing.T, db *database.DB) *outbox.Publisher {
	p, err := outbox.NewPublisher(db, nil)
	require.NoError(t, err)
	return p
}

func mustClient(t *testing.T, db *database.DB) *jobs.Client {
	c, err := jobs.NewClient(db)
	require.NoError(t, err)
	return c
}
