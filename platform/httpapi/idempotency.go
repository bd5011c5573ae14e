package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/keelson/keelson/platform/database"
)

// IdempotencyKeyHeader names the header a client sets to make a POST safe to retry.
const IdempotencyKeyHeader = "Idempotency-Key"

// Idempotency problem codes.
const (
	CodeInvalidIdempotencyKey = "invalid_idempotency_key"
	CodeIdempotencyKeyReused  = "idempotency_key_reused"
	CodeIdempotencyInProgress = "idempotency_in_progress"
)

// IdempotencyKeyLifetime is how long a key and its stored response are kept.
const IdempotencyKeyLifetime = 24 * time.Hour

// idempotencyLock is how long a claim keeps retries out (409) before another request may take the key
// over; it exceeds the server's write timeout, so it outlives every request that still runs.
const idempotencyLock = 90 * time.Second

// IdempotentRedactedHeader on a replay names the body fields left out: secrets (a signing secret, a
// token) are shown once, in the first answer, and never stored with the key.
const IdempotentRedactedHeader = "Idempotent-Redacted"

// secretFieldsKey is where a route's writer leaves the JSON fields of its body that must not be stored.
const secretFieldsKey = "httpapi.secret_fields"

// replayedHeaders are the response headers stored with a key and replayed; others (Date, request ids)
// belong to one answer.
var replayedHeaders = []string{"Content-Type", "Location", "ETag"}

// saneIdempotencyKey bounds a key: 1–255 visible ASCII characters.
var saneIdempotencyKey = regexp.MustCompile(`^[\x21-\x7e]{1,255}$`)

// idempotency makes a POST with an Idempotency-Key happen once per (owner, route, key), as Stripe does:
//  1. claim the key in its own committed statement (never inside the handler's transaction, or every
//     concurrent duplicate would wait on the uncommitted row instead of getting 409);
//  2. run the handler in one unit of work carried by the request context (the services' WithTx join
//     it) and store the response in that same transaction, so effect and stored response commit together;
//  3. a repeat with the same fingerprint replays the stored status, headers and body; another body is
//     422; a claim still held is 409 with Retry-After. A 5xx is not stored: the key is released so a
//     retry can succeed.
type idempotency struct {
	db *database.DB
}

func (m *idempotency) middleware() gin.HandlerFunc {
	return func(c *gin.Context) {
		raw := c.GetHeader(IdempotencyKeyHeader)
		if c.Request.Method != http.MethodPost || raw == "" {
			c.Next()
			return
		}
		key := strings.TrimSpace(raw)
		if len(key) >= 2 && key[0] == '"' && key[len(key)-1] == '"' {
			key = key[1 : len(key)-1] // a structured-field string; Stripe's clients send it bare
		}
		if !saneIdempotencyKey.MatchString(key) {
			writeError(c, newProblem(http.StatusBadRequest, CodeInvalidIdempotencyKey,
				"Idempotency-Key must be 1–255 visible ASCII characters"))
			return
		}
		body, err := io.ReadAll(c.Request.Body)
		if err != nil {
			writeError(c, err)
			return
		}
		c.Request.Body = io.NopCloser(bytes.NewReader(body))
		k := keyRow{owner: ownerOf(c.Request), route: c.Request.Method + " " + routeOf(c), key: key,
			fingerprint: fingerprint(c.Request.Method, c.Request.URL.Path, body)}
		lock, err := m.claim(c, k)
		if err != nil {
			writeError(c, err)
			return
		}
		m.run(c, k, lock)
	}
}

type keyRow struct {
	owner, route, key string
	fingerprint       []byte
}

// ownerOf scopes keys to the caller: the digest of its bearer token, so two clients never share a key.
func ownerOf(r *http.Request) string {
	_, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return fmt.Sprintf("token:%x", sum[:12])
}

func fingerprint(method, path string, body []byte) []byte {
	h := sha256.New()
	for _, part := range [][]byte{[]byte(method), []byte(path), body} {
		h.Write([]byte(strconv.Itoa(len(part)) + ":"))
		h.Write(part)
	}
	return h.Sum(nil)
}

// claim takes the key for this request, or answers for it (replay, 409, 422) and returns uuid.Nil.
func (m *idempotency) claim(c *gin.Context, k keyRow) (uuid.UUID, error) {
	ctx := c.Request.Context()
	conn := m.db.Conn(context.WithoutCancel(ctx))
	lock := uuid.New()
	res := conn.Exec(`INSERT INTO idempotency_keys (owner, route, key, fingerprint, lock_token, locked_until)
		VALUES (?, ?, ?, ?, ?, clock_timestamp() + make_interval(secs => ?)) ON CONFLICT DO NOTHING`,
		k.owner, k.route, k.key, k.fingerprint, lock, idempotencyLock.Seconds())
	if res.Error != nil {
		return uuid.Nil, fmt.Errorf("idempotency: claim key: %w", res.Error)
	}
	if res.RowsAffected == 1 {
		return lock, nil
	}
	var (
		fp      []byte
		status  sql.NullInt64
		headers []byte
		body    []byte
		waitMS  sql.NullInt64
		expired bool
	)
	err := conn.Raw(`SELECT fingerprint, status, headers, body,
			ceil(extract(epoch FROM locked_until - clock_timestamp()) * 1000)::bigint,
			created_at < clock_timestamp() - make_interval(secs => ?)
		FROM idempotency_keys WHERE owner = ? AND route = ? AND key = ?`,
		IdempotencyKeyLifetime.Seconds(), k.owner, k.route, k.key).Row().
		Scan(&fp, &status, &headers, &body, &waitMS, &expired)
	if errors.Is(err, sql.ErrNoRows) {
		return m.claim(c, k) // pruned between the two statements
	}
	if err != nil {
		return uuid.Nil, fmt.Errorf("idempotency: read key: %w", err)
	}
	if expired || (!status.Valid && (!waitMS.Valid || waitMS.Int64 <= 0)) {
		// A key past its lifetime is new again; a claim whose request died (lock expired, no response) is taken over.
		res := conn.Exec(`UPDATE idempotency_keys SET fingerprint = ?, lock_token = ?, status = NULL, headers = NULL,
				body = NULL, locked_until = clock_timestamp() + make_interval(secs => ?),
				created_at = CASE WHEN ? THEN clock_timestamp() ELSE created_at END
			WHERE owner = ? AND route = ? AND key = ? AND (? OR (status IS NULL AND locked_until <= clock_timestamp()))`,
			k.fingerprint, lock, idempotencyLock.Seconds(), expired, k.owner, k.route, k.key, expired)
		if res.Error != nil {
			return uuid.Nil, fmt.Errorf("idempotency: take over key: %w", res.Error)
		}
		if res.RowsAffected == 1 {
			return lock, nil
		}
		return m.claim(c, k) // another request took it first: answer as its duplicate
	}
	if !bytes.Equal(fp, k.fingerprint) {
		return uuid.Nil, newProblem(http.StatusUnprocessableEntity, CodeIdempotencyKeyReused,
			"this Idempotency-Key was used with another request; use a new key for a new request")
	}
	if !status.Valid {
		secs := (waitMS.Int64 + 999) / 1000
		c.Header("Retry-After", strconv.FormatInt(max(secs, 1), 10))
		return uuid.Nil, newProblem(http.StatusConflict, CodeIdempotencyInProgress,
			"a request with this Idempotency-Key is still in progress; retry later")
	}
	var storedHeaders map[string][]string
	if err := json.Unmarshal(headers, &storedHeaders); err != nil {
		return uuid.Nil, fmt.Errorf("idempotency: stored headers: %w", err)
	}
	for name, values := range storedHeaders {
		for _, v := range values {
			c.Writer.Header().Add(name, v)
		}
	}
	c.Header("Idempotent-Replayed", "true")
	c.Data(int(status.Int64), c.Writer.Header().Get("Content-Type"), body)
	c.Abort()
	return uuid.Nil, nil
}

// run executes the rest of the chain in one unit of work, stores its answer with the key and sends it.
func (m *idempotency) run(c *gin.Context, k keyRow, lock uuid.UUID) {
	if lock == uuid.Nil {
		return // answered by claim
	}
	real := c.Writer
	capture := &capturingWriter{ResponseWriter: real, status: http.StatusOK}
	c.Writer = capture
	ctx := c.Request.Context()
	stored := false
	defer func() {
		c.Writer = real
		if !stored {
			// Nothing was stored (a 5xx, a panic, a failed commit): free the key so a retry runs afresh.
			m.db.Conn(context.WithoutCancel(ctx)).Exec(`DELETE FROM idempotency_keys
				WHERE owner = ? AND route = ? AND key = ? AND lock_token = ? AND status IS NULL`,
				k.owner, k.route, k.key, lock)
		}
		if capture.statusSet || capture.wroteHeader {
			real.WriteHeader(capture.status)
		}
		if capture.body.Len() > 0 {
			_, _ = real.Write(capture.body.Bytes())
		}
	}()
	errNotStored := errors.New("response not stored")
	err := m.db.WithTx(ctx, func(txCtx context.Context) (err error) {
		c.Request = c.Request.WithContext(txCtx)
		c.Next()
		c.Request = c.Request.WithContext(ctx)
		if !storable(capture.status) {
			return errNotStored // roll back whatever the handler did: its answer is not final
		}
		headers := map[string][]string{}
		for _, name := range replayedHeaders {
			if v := capture.Header().Values(name); len(v) > 0 {
				headers[name] = v
			}
		}
		body := capture.body.Bytes()
		if fields := c.GetStringSlice(secretFieldsKey); len(fields) > 0 {
			if body, err = redact(body, fields); err != nil {
				return err
			}
			headers[IdempotentRedactedHeader] = []string{strings.Join(fields, ", ")}
		}
		rawHeaders, err := json.Marshal(headers)
		if err != nil {
			return err
		}
		res := m.db.Conn(txCtx).Exec(`UPDATE idempotency_keys SET status = ?, headers = ?, body = ?,
				lock_token = NULL, locked_until = NULL
			WHERE owner = ? AND route = ? AND key = ? AND lock_token = ?`,
			capture.status, rawHeaders, body, k.owner, k.route, k.key, lock)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected != 1 {
			return errors.New("idempotency: the key's claim was taken over")
		}
		return nil
	})
	switch {
	case err == nil:
		stored = true
	case capture.status >= http.StatusBadRequest:
		// A refusal or failure: its effect (if any) rolled back, and its answer stands unstored.
	default:
		// A success whose transaction did not commit: the client must not believe it happened.
		rendererOf(c).logger.WarnContext(ctx, "idempotent request rolled back: its response could not be stored",
			"error", err.Error(), "route", k.route)
		capture.reset()
		writeError(c, err)
	}
}

// redact drops fields from a JSON object body; a body that is not one is refused rather than stored
// with whatever it holds.
func redact(body []byte, fields []string) ([]byte, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, fmt.Errorf("idempotency: a body with secret fields is not a JSON object: %w", err)
	}
	for _, f := range fields {
		delete(obj, f)
	}
	return json.Marshal(obj)
}

// storable: 5xx, 409 (a race or a request in progress) and 429 are not final, so a retry runs again.
func storable(status int) bool {
	return status < http.StatusInternalServerError && status != http.StatusConflict && status != http.StatusTooManyRequests
}

// capturingWriter holds a handler's answer until it is stored with the key.
type capturingWriter struct {
	gin.ResponseWriter
	status      int
	statusSet   bool // WriteHeader was called
	wroteHeader bool // the header counts as sent (WriteHeaderNow or a body write), as gin's Written means
	body        bytes.Buffer
}

func (w *capturingWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.status, w.statusSet = code, true
	}
}
func (w *capturingWriter) WriteHeaderNow() { w.wroteHeader = true }
func (w *capturingWriter) Write(b []byte) (int, error) {
	w.wroteHeader = true
	return w.body.Write(b)
}
func (w *capturingWriter) WriteString(s string) (int, error) { return w.Write([]byte(s)) }
func (w *capturingWriter) Status() int                       { return w.status }
func (w *capturingWriter) Size() int {
	if !w.wroteHeader {
		return -1
	}
	return w.body.Len()
}
func (w *capturingWriter) Written() bool { return w.wroteHeader }
func (w *capturingWriter) Flush()        {}

func (w *capturingWriter) reset() {
	w.status, w.statusSet, w.wroteHeader = http.StatusOK, false, false
	w.body.Reset()
	w.Header().Del("Location")
	w.Header().Del("ETag")
}

// PruneIdempotencyKeys deletes keys past IdempotencyKeyLifetime, at most batch rows per statement,
// until none is left or ctx ends; it returns how many went.
func PruneIdempotencyKeys(ctx context.Context, db *database.DB, batch int) (int64, error) {
	var total int64
	for ctx.Err() == nil {
		res := db.Conn(ctx).Exec(`DELETE FROM idempotency_keys WHERE ctid IN (
			SELECT ctid FROM idempotency_keys WHERE created_at < now() - make_interval(secs => ?)
			ORDER BY created_at LIMIT ? FOR UPDATE SKIP LOCKED)`, IdempotencyKeyLifetime.Seconds(), batch)
		if res.Error != nil {
			return total, fmt.Errorf("idempotency: prune: %w", res.Error)
		}
		total += res.RowsAffected
		if res.RowsAffected < int64(batch) {
			return total, nil
		}
	}
	return total, ctx.Err()
}
