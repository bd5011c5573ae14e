package webhooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/keelson/keelson/modules/webhooks/internal/egress"
	"github.com/keelson/keelson/modules/webhooks/internal/signing"
)

// Error classes of a failed attempt (stored with the attempt, labelled in metrics).
const (
	errClassTimeout     = "timeout"
	errClassConnection  = "connection"
	errClassSSRFBlocked = "ssrf_blocked"
	errClassHTTPStatus  = "http_status"
	errClassRequest     = "request"
)

const (
	// responseExcerptBytes caps what is kept of a receiver's answer (cut at a UTF-8 boundary).
	responseExcerptBytes = 4096
	// maxErrorLength bounds an attempt's error text, parts of which come from the receiver.
	maxErrorLength = 512
	// drainBytes is how much more of a body is read so the connection can be reused.
	drainBytes = 64 << 10
	userAgent  = "Keelson-Webhooks/1"
)

// outgoing is one signed webhook request.
type outgoing struct {
	URL       string
	MessageID string            // the event id: the same on every attempt
	Body      []byte            // signed and sent byte for byte
	Keys      []signing.Key     // current secret first, then a rotated-out one still in its grace period
	Headers   map[string]string // the subscription's own; names the sender sets are refused at validation
	// Hung, if set, runs (in a goroutine of its own) when no response headers arrived within the
	// sender's hangAfter; the request goes on until its timeout.
	Hung func()
}

// sendResult is what one attempt observed.
type sendResult struct {
	Duration   time.Duration
	StatusCode int // 0 when no response arrived
	ErrorClass string
	Error      string
	Excerpt    string
	Headers    map[string]string // the keptResponseHeaders the receiver sent
	RetryAfter time.Duration     // the receiver's Retry-After on a 429 or 503, uncapped; 0 if none
	keyMissing bool              // nothing sent: this replica lacks a key the subscription's values are sealed under
}

// keyMissingBackoff is how long a delivery this replica could not open waits before it is due again.
const keyMissingBackoff = 30 * time.Second

// keptResponseHeaders are the response headers an attempt keeps: enough to tell what answered and why.
var keptResponseHeaders = []string{"Content-Type", "Content-Length", "Retry-After", "Location", "Server", "Date", "X-Request-Id"}

// Gone is true for 410: the receiver says the endpoint is gone for good.
func (r sendResult) Gone() bool { return r.StatusCode == http.StatusGone }

// Succeeded is true for a 2xx answer.
func (r sendResult) Succeeded() bool {
	return r.ErrorClass == "" && r.StatusCode >= 200 && r.StatusCode < 300
}

// sender posts signed webhook requests through an SSRF-guarded, redirect-refusing client.
type sender struct {
	client    *http.Client
	now       func() time.Time
	hangAfter time.Duration // when outgoing.Hung runs; 0 = never
}

// newSender sizes its keep-alive pools to the sends a replica makes at once (concurrency): one host,
// which the endpoints of many subscriptions may share, keeps as many idle connections as requests can
// be in flight to it, so a burst that used them all finds them again instead of dialing anew; all
// hosts together keep four times that.
func newSender(timeout time.Duration, targets egress.Policy, concurrency int, now func() time.Time) *sender {
	transport := &http.Transport{
		Proxy:                  nil, // a proxy would connect on our behalf and bypass the dial guard
		DialContext:            targets.DialContext(timeout),
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           4 * concurrency,
		MaxIdleConnsPerHost:    concurrency,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    timeout,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 64 << 10, // a receiver's headers are read, not trusted
	}
	return &sender{
		client: &http.Client{
			Transport: transport,
			Timeout:   timeout,
			// A redirect is a failed attempt: following it would leave the URL that was validated.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		now: now,
	}
}

// send makes one attempt with a fresh timestamp and signature over the exact body bytes.
func (s *sender) send(ctx context.Context, out outgoing) sendResult {
	started := s.now()
	var res sendResult
	finish := func() sendResult { res.Duration = s.now().Sub(started); return res }

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, out.URL, bytes.NewReader(out.Body))
	if err != nil {
		res.ErrorClass, res.Error = errClassRequest, err.Error()
		return finish()
	}
	ts := started.Unix()
	req.Header.Set("User-Agent", userAgent)
	for name, value := range out.Headers {
		req.Header.Set(name, value)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(signing.HeaderID, out.MessageID)
	req.Header.Set(signing.HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(signing.HeaderSignature, signing.Header(out.Keys, out.MessageID, ts, out.Body))

	var hang *time.Timer
	if out.Hung != nil && s.hangAfter > 0 {
		hang = time.AfterFunc(s.hangAfter, out.Hung)
	}
	resp, err := s.client.Do(req) // returns once the response headers arrived
	if hang != nil {
		hang.Stop()
	}
	if err != nil {
		res.ErrorClass, res.Error = classifyTransportError(err), truncate(err.Error(), maxErrorLength)
		return finish()
	}
	defer resp.Body.Close()
	res.StatusCode = resp.StatusCode
	res.Headers = keptHeaders(resp.Header)
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		res.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), started)
	}
	excerpt, readErr := io.ReadAll(io.LimitReader(resp.Body, responseExcerptBytes))
	res.Excerpt = cleanExcerpt(excerpt)
	if readErr == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainBytes))
	}
	// A 2xx counts even if its body broke off: the receiver accepted the request.
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		res.ErrorClass = errClassHTTPStatus
		res.Error = truncate(fmt.Sprintf("redirect not followed: %d %s", resp.StatusCode, resp.Header.Get("Location")), maxErrorLength)
	case resp.StatusCode < 200 || resp.StatusCode >= 300:
		res.ErrorClass = errClassHTTPStatus
		res.Error = "unexpected status " + resp.Status
	}
	return finish()
}

// keptHeaders copies the keptResponseHeaders present, each value cut to maxHeaderValueLength.
func keptHeaders(h http.Header) map[string]string {
	out := map[string]string{}
	for _, name := range keptResponseHeaders {
		if v := h.Get(name); v != "" {
			out[name] = truncate(v, maxHeaderValueLength)
		}
	}
	return out
}

// maxHeaderValueLength bounds a kept response header value.
const maxHeaderValueLength = 256

// parseRetryAfter reads delay-seconds or an HTTP date (RFC 9110 §10.2.3); 0 when absent, malformed
// or already past.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		if secs > int64(maxRetryAfter/time.Second) {
			return maxRetryAfter
		}
		return time.Duration(secs) * time.Second
	}
	if at, err := http.ParseTime(v); err == nil && at.After(now) {
		return min(at.Sub(now), maxRetryAfter)
	}
	return 0
}

// maxRetryAfter keeps an absurd Retry-After from overflowing; Config.RetryAfterMax caps it further.
const maxRetryAfter = 365 * 24 * time.Hour

// classifyTransportError names why no response arrived.
func classifyTransportError(err error) string {
	var netErr net.Error
	switch {
	case errors.Is(err, egress.ErrBlockedAddress):
		return errClassSSRFBlocked
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return errClassTimeout
	default:
		return errClassConnection
	}
}

// truncate cuts s to at most n bytes, keeping valid UTF-8 without NUL bytes.
func truncate(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return cleanExcerpt([]byte(s))
}

// cleanExcerpt keeps valid UTF-8 without NUL bytes (PostgreSQL text refuses both), never longer than
// read: invalid bytes, such as a character cut by the byte limit, are dropped.
func cleanExcerpt(b []byte) string {
	s := string(b)
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "")
	}
	return strings.ReplaceAll(s, "\x00", "")
}
