package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
)

// maxBody bounds what the receiver reads: webhook payloads are small.
const maxBody = 1 << 20

// NewHandler answers 204 to every correctly signed POST, 401 to a bad signature, and 503 to every
// failEvery-th request when failEvery > 0.
func NewHandler(v *Verifier, failEvery int, logger *slog.Logger) http.Handler {
	var count atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
		if err != nil {
			http.Error(w, "unreadable body", http.StatusBadRequest)
			return
		}
		var envelope struct {
			ID        string          `json:"id"`
			Type      string          `json:"type"`
			Timestamp string          `json:"timestamp"`
			Data      json.RawMessage `json:"data"`
		}
		_ = json.Unmarshal(body, &envelope) // logged as received even when it is not our envelope
		attrs := []any{
			"webhook_id", r.Header.Get(HeaderID),
			"webhook_timestamp", r.Header.Get(HeaderTimestamp),
			"webhook_signature", r.Header.Get(HeaderSignature),
			"type", envelope.Type,
			"path", r.URL.Path,
			"data", string(envelope.Data),
		}
		if err := v.Verify(body, r.Header); err != nil {
			logger.Warn("webhook refused", append(attrs, "error", err)...)
			http.Error(w, "signature: "+err.Error(), http.StatusUnauthorized)
			return
		}
		if n := count.Add(1); failEvery > 0 && n%int64(failEvery) == 0 {
			logger.Info("webhook received, answering 503 on purpose", attrs...)
			http.Error(w, "failing on purpose", http.StatusServiceUnavailable)
			return
		}
		logger.Info("webhook received", append(attrs, "verified", v.Enabled())...)
		w.WriteHeader(http.StatusNoContent)
	})
}
