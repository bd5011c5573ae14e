package main

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

const specSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func TestSignReproducesTheSpecTestVector(t *testing.T) {
	v, err := NewVerifier([]string{specSecret}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got := Sign(v.keys[0], "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
}

func TestVerifyAcceptsWhatTheReferenceLibrarySigns(t *testing.T) {
	const other = "whsec_c2Vjb25kLXNlY3JldC1vZi10aGlydHktdHdvLWJ5dGVz"
	body := []byte(`{"id":"evt_1","type":"note.created","timestamp":"2026-11-30T10:00:00Z","data":{}}`)
	now := time.Now()
	sign := func(secret string) string {
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		sig, err := wh.Sign("evt_1", now, body)
		if err != nil {
			t.Fatal(err)
		}
		return sig
	}
	headers := func(sig string, ts time.Time) http.Header {
		h := http.Header{}
		h.Set(HeaderID, "evt_1")
		h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
		h.Set(HeaderSignature, sig)
		return h
	}
	v, err := NewVerifier([]string{specSecret}, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		body []byte
		h    http.Header
		want error
	}{
		{"signed", body, headers(sign(specSecret), now), nil},
		{"rotation: the matching signature is second", body, headers(sign(other)+" "+sign(specSecret), now), nil},
		{"another secret", body, headers(sign(other), now), ErrNoMatch},
		{"tampered body", append([]byte(" "), body...), headers(sign(specSecret), now), ErrNoMatch},
		{"replayed an hour later", body, headers(sign(specSecret), now.Add(-time.Hour)), ErrBadTimestamp},
		{"no signature", body, headers("", now), ErrMissingHeaders},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := v.Verify(c.body, c.h); !errors.Is(err, c.want) {
				t.Fatalf("Verify = %v, want %v", err, c.want)
			}
		})
	}
}

func TestHandlerAnswersBySignature(t *testing.T) {
	v, err := NewVerifier([]string{specSecret}, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(NewHandler(v, 0, slog.New(slog.NewTextHandler(io.Discard, nil))))
	defer srv.Close()
	body := []byte(`{"id":"evt_2","type":"t","timestamp":"2026-11-30T10:00:00Z","data":{"a":1}}`)
	post := func(sig string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/hooks", bytes.NewReader(body))
		req.Header.Set(HeaderID, "evt_2")
		req.Header.Set(HeaderTimestamp, strconv.FormatInt(time.Now().Unix(), 10))
		req.Header.Set(HeaderSignature, sig)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := post(Sign(v.keys[0], "evt_2", time.Now().Unix(), body)); got != http.StatusNoContent {
		t.Fatalf("signed request: status %d, want 204", got)
	}
	if got := post("v1,AAAA"); got != http.StatusUnauthorized {
		t.Fatalf("bad signature: status %d, want 401", got)
	}
}

func TestRunRefusesBadConfiguration(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"secret by flag", []string{"-secrets", "whsec_%%%"}, nil, "invalid secrets"},
		{"secret by environment", nil, map[string]string{"RECEIVER_SECRETS": "whsec_%%%"}, "invalid secrets"},
		{"fail-every", []string{"-fail-every", "-1"}, nil, "invalid fail-every"},
		{"unknown flag", []string{"-port", "9000"}, nil, "flag provided but not defined"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := run(t.Context(), c.args, env(c.env), logger)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("run = %v, want an error containing %q", err, c.want)
			}
		})
	}
}

func TestHealthcheckSucceedsOnlyWhileSomethingListens(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	env := func(k string) string { return map[string]string{"RECEIVER_ADDR": ":" + port}[k] }
	if err := run(t.Context(), []string{"healthcheck"}, env, logger); err != nil {
		t.Fatalf("healthcheck while listening: %v", err)
	}
	_ = l.Close()
	if err := run(t.Context(), []string{"healthcheck"}, env, logger); err == nil {
		t.Fatal("healthcheck with nothing listening succeeded")
	}
}
