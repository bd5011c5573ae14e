// Command receiver is the demo webhook endpoint of docker compose: it verifies each request's
// Standard Webhooks signature and logs the delivery, so `docker compose up` shows signed events arriving.
//
// Configuration: RECEIVER_ADDR [:9000], RECEIVER_SECRETS (comma-separated whsec_… secrets; empty =
// log deliveries without checking signatures), RECEIVER_FAIL_EVERY [0] (answer 503 to every Nth
// request, to watch retries).
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(os.Stdout, nil))
	if err := run(ctx, os.Getenv, logger); err != nil {
		fmt.Fprintln(os.Stderr, "receiver:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string, logger *slog.Logger) error {
	addr := getenv("RECEIVER_ADDR")
	if addr == "" {
		addr = ":9000"
	}
	verifier, err := NewVerifier(splitList(getenv("RECEIVER_SECRETS")), 5*time.Minute)
	if err != nil {
		return fmt.Errorf("invalid RECEIVER_SECRETS: %w", err)
	}
	failEvery := 0
	if v := getenv("RECEIVER_FAIL_EVERY"); v != "" {
		if failEvery, err = strconv.Atoi(v); err != nil || failEvery < 0 {
			return fmt.Errorf("invalid RECEIVER_FAIL_EVERY: %q is not a count", v)
		}
	}
	srv := &http.Server{
		Addr:              addr,
		Handler:           NewHandler(verifier, failEvery, logger),
		ReadHeaderTimeout: 5 * time.Second,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	logger.Info("receiver listening", "addr", addr, "verifying", verifier.Enabled(), "fail_every", failEvery)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
