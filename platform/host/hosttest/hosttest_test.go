package hosttest_test

import (
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/keelson/keelson/platform/apperr"
	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/host/hosttest"
	"github.com/keelson/keelson/platform/httpapi"
	"github.com/keelson/keelson/platform/messaging"
	"github.com/keelson/keelson/platform/module"
	"github.com/keelson/keelson/platform/tenancy"
)

const eventEchoed = "echo.created"

// echo is a module with one route: it answers what it was sent and publishes it as an event.
type echo struct{}

func (echo) Name() string      { return "echo" }
func (echo) Migrations() fs.FS { return nil }
func (echo) Register(r *module.Registry) error {
	r.Routes(func(api *httpapi.API) {
		api.POST("/echo", httpapi.H(func(c *gin.Context) error {
			var in struct {
				Text string `json:"text"`
			}
			if err := httpapi.BindJSON(c, &in); err != nil {
				return err
			}
			var v apperr.Validator
			v.Check(in.Text != "", "text", "must not be empty")
			if err := v.Err(); err != nil {
				return err
			}
			ctx := c.Request.Context()
			e, err := messaging.NewEvent(tenancy.With(ctx, tenancy.DefaultID), "echo", eventEchoed, in)
			if err != nil {
				return err
			}
			if err := r.DB.WithTx(ctx, func(ctx context.Context) error { return r.Events.Publish(ctx, e) }); err != nil {
				return err
			}
			c.JSON(http.StatusCreated, gin.H{"text": in.Text, "id": e.ID, "header": c.GetHeader("X-Echo")})
			return nil
		}))
	})
	return nil
}

type echoed struct {
	Text, ID, Header string
}

func TestHTTPHelpers(t *testing.T) {
	db := dbtest.New(t)
	r := hosttest.Start(t, db, hosttest.Options{}, echo{})

	resp := r.Do(t, http.MethodPost, "/api/v1/echo", map[string]string{"text": "hi"}, "X-Echo", "yes")
	if resp.Status != http.StatusCreated {
		t.Fatalf("status %d: %s", resp.Status, resp.Body)
	}
	got := hosttest.Decode[echoed](t, resp)
	if got.Text != "hi" || got.Header != "yes" || got.ID == "" {
		t.Fatalf("echoed %+v", got)
	}
	if n := hosttest.Count(t, db, `SELECT count(*) FROM outbox_messages WHERE payload->'metadata'->>'event_type' = ?`, eventEchoed); n != 1 {
		t.Fatalf("%d events in the outbox of an HTTP-only replica, want 1", n)
	}

	invalid := hosttest.Decode[hosttest.Problem](t, r.Do(t, http.MethodPost, "/api/v1/echo", `{"text":""}`))
	if invalid.Status != http.StatusUnprocessableEntity || len(invalid.Errors) != 1 || invalid.Errors[0].Field != "text" {
		t.Fatalf("validation problem %+v", invalid)
	}
	unsupported := r.Do(t, http.MethodPost, "/api/v1/echo", `{"text":"x"}`, "Content-Type", "")
	if p := hosttest.Decode[hosttest.Problem](t, unsupported); unsupported.Status != http.StatusUnsupportedMediaType || p.Code == "" {
		t.Fatalf("without Content-Type: %d %+v", unsupported.Status, p)
	}
	if anonymous := r.Do(t, http.MethodPost, "/api/v1/echo", nil, "Authorization", ""); anonymous.Status != http.StatusUnauthorized {
		t.Fatalf("without a token: %d", anonymous.Status)
	}
}

// TestReplicasShareABroker runs two background replicas on one database and one broker config:
// the recorder they share sees each event once, and at the end the test's queues and exchange are gone.
func TestReplicasShareABroker(t *testing.T) {
	broker := hosttest.Broker()
	consumer := (&hosttest.Recorder{}).Name()
	t.Run("replicas", func(t *testing.T) {
		database := dbtest.Create(t)
		rec := &hosttest.Recorder{}
		a := hosttest.Start(t, database.Open(t), hosttest.Options{Messaging: broker, Background: true}, echo{}, rec)
		b := hosttest.Start(t, database.Open(t), hosttest.Options{Messaging: broker, Background: true}, echo{}, rec)
		if a.InstanceID == b.InstanceID {
			t.Fatalf("both replicas are %s", a.InstanceID)
		}
		for i, r := range []*hosttest.Replica{a, b, a, b} {
			if resp := r.Do(t, http.MethodPost, "/api/v1/echo", map[string]string{"text": string(rune('a' + i))}); resp.Status != http.StatusCreated {
				t.Fatalf("status %d: %s", resp.Status, resp.Body)
			}
		}
		// The same event published twice (a redelivery) is recorded once.
		e, err := messaging.NewEvent(tenancy.With(context.Background(), tenancy.DefaultID), "test", eventEchoed, map[string]string{"text": "again"})
		if err != nil {
			t.Fatal(err)
		}
		db := a.Registry.DB
		for range 2 {
			if err := db.WithTx(context.Background(), func(ctx context.Context) error { return a.Registry.Events.Publish(ctx, e) }); err != nil {
				t.Fatal(err)
			}
		}
		hosttest.Eventually(t, 20*time.Second, func() bool {
			return hosttest.Count(t, db, `SELECT count(*) FROM outbox_messages`) == 0 && len(rec.OfType(eventEchoed)) >= 5
		}, "5 events forwarded and recorded")
		if got := rec.OfType(eventEchoed); len(got) != 5 {
			t.Fatalf("%d events recorded, want 5", len(got))
		}
		if others := rec.OfType("other.type"); len(others) != 0 {
			t.Fatalf("recorded %d events of a type nobody published", len(others))
		}
	})

	conn, err := amqp.Dial(broker.AMQPURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range []string{broker.QueuePrefix + "." + consumer, broker.QueuePrefix + "." + consumer + ".dead"} {
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ch.QueueDeclarePassive(q, true, false, false, false, nil); err == nil {
			_ = ch.Close()
			t.Errorf("queue %s left behind", q)
		}
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeDeclarePassive(broker.Exchange, "topic", true, false, false, false, nil); err == nil {
		_ = ch.Close()
		t.Errorf("exchange %s left behind", broker.Exchange)
	}
}

func TestEventuallyFailsAfterTheTimeout(t *testing.T) {
	var spy failSpy
	hosttest.Eventually(&spy, 50*time.Millisecond, func() bool { return false }, "never %s", "true")
	if spy.msg != "not reached within 50ms: never true" {
		t.Fatalf("failure %q", spy.msg)
	}
}

// failSpy captures a Fatalf instead of stopping the test.
type failSpy struct {
	testing.TB
	msg string
}

func (f *failSpy) Helper() {}
func (f *failSpy) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
}

// looper declares a per-replica loop that says when it started and when it ended.
type looper struct{ started, ended chan struct{} }

func (looper) Name() string      { return "looper" }
func (looper) Migrations() fs.FS { return nil }
func (l looper) Register(r *module.Registry) error {
	r.Loop(module.Loop{Name: "looper", Run: func(ctx context.Context) error {
		close(l.started)
		<-ctx.Done()
		close(l.ended)
		return nil
	}})
	return nil
}

func TestAModulesLoopRunsOnABackgroundReplicaUntilItStops(t *testing.T) {
	db := dbtest.New(t)
	idle := looper{started: make(chan struct{}), ended: make(chan struct{})}
	hosttest.Start(t, db, hosttest.Options{}, idle).Stop()
	select {
	case <-idle.started:
		t.Fatal("a replica without background work ran the loop")
	default:
	}

	l := looper{started: make(chan struct{}), ended: make(chan struct{})}
	r := hosttest.Start(t, db, hosttest.Options{Background: true}, l)
	select {
	case <-l.started:
	case <-time.After(20 * time.Second):
		t.Fatal("the loop did not start")
	}
	r.Stop()
	select {
	case <-l.ended:
	default:
		t.Fatal("the replica stopped before its loop ended")
	}
}
