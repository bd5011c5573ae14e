// Command receiver is the demo webhook endpoint of docker compose: it verifies each request's
// Standard Webhooks signature and logs the delivery, so `docker compose up` shows signed events arriving.
//
// Configuration, by flag or environment variable (the flag wins):
//
//	-addr       RECEIVER_ADDR        listen address [:9000]
//	-secrets    RECEIVER_SECRETS     comma-separated whsec_… secrets; empty = log without checking signatures
//	-fail-every RECEIVER_FAIL_EVERY  answer 503 to every Nth request, to watch retries [0 = never]
//
// `receiver healthcheck` exits 0 when something accepts connections on the listen address: the
// compose healthcheck of an image without a shell.
//
// Locally: go run ./examples/receiver -addr 127.0.0.1:9000 -secrets whsec_…
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
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
	if err := run(ctx, os.Args[1:], os.Getenv, logger); err != nil {
		fmt.Fprintln(os.Stderr, "receiver:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, logger *slog.Logger) error {
	if len(args) == 1 && args[0] == "healthcheck" {
		return healthcheck(ctx, or(getenv("RECEIVER_ADDR"), ":9000"))
	}
	flags := flag.NewFlagSet("receiver", flag.ContinueOnError)
	addr := flags.String("addr", or(getenv("RECEIVER_ADDR"), ":9000"), "listen address (RECEIVER_ADDR)")
	secrets := flags.String("secrets", getenv("RECEIVER_SECRETS"), "comma-separated whsec_ secrets (RECEIVER_SECRETS)")
	failEveryRaw := flags.String("fail-every", or(getenv("RECEIVER_FAIL_EVERY"), "0"), "answer 503 to every Nth request (RECEIVER_FAIL_EVERY)")
	if err := flags.Parse(args); err != nil {
		return err
	}
	verifier, err := NewVerifier(splitList(*secrets), 5*time.Minute)
	if err != nil {
		return fmt.Errorf("invalid secrets: %w", err)
	}
	failEvery, err := strconv.Atoi(*failEveryRaw)
	if err != nil || failEvery < 0 {
		return fmt.Errorf("invalid fail-every: %q is not a count", *failEveryRaw)
	}
	srv := &http.Server{
		Addr:              *addr,
		Handler:           NewHandler(verifier, failEvery, logger),
		ReadHeaderTimeout: 5 * time.Second,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	logger.Info("receiver listening", "addr", *addr, "verifying", verifier.Enabled(), "fail_every", failEvery)
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

// healthcheck connects to the listen address on loopback when its host is empty or a wildcard.
func healthcheck(ctx context.Context, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	d := net.Dialer{Timeout: 3 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, port))
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	return conn.Close()
}

func or(v, fallback string) string {
	if v == "" {
		return fallback
	}
	return v
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
