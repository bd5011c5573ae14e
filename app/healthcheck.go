package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// errUnhealthy makes `keelson healthcheck` exit 1 after it printed why.
var errUnhealthy = errors.New("unhealthy")

// healthcheckTimeout stays under the container healthcheck's timeout, so the check answers itself.
const healthcheckTimeout = 3 * time.Second

// healthcheck asks the replica listening on HTTP_ADDR in this container for /readyz: the runtime
// image has no shell or curl, so the binary is its own probe.
func healthcheck(ctx context.Context, httpAddr string, stdout io.Writer) error {
	url, err := readyURL(httpAddr)
	if err != nil {
		fmt.Fprintln(stdout, "healthcheck:", err)
		return errUnhealthy
	}
	ctx, cancel := context.WithTimeout(ctx, healthcheckTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil) //nolint:gosec // the replica's own /readyz on its own HTTP_ADDR
	if err != nil {
		fmt.Fprintln(stdout, "healthcheck:", err)
		return errUnhealthy
	}
	resp, err := http.DefaultClient.Do(req) //nolint:gosec // the replica's own /readyz on its own HTTP_ADDR
	if err != nil {
		fmt.Fprintln(stdout, "healthcheck:", err)
		return errUnhealthy
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	fmt.Fprintf(stdout, "healthcheck: %s %d %s\n", url, resp.StatusCode, body)
	if resp.StatusCode != http.StatusOK {
		return errUnhealthy
	}
	return nil
}

// readyURL turns a listen address into the loopback URL of its /readyz: an empty or wildcard host
// is reached on 127.0.0.1.
func readyURL(httpAddr string) (string, error) {
	host, port, err := net.SplitHostPort(httpAddr)
	if err != nil {
		return "", fmt.Errorf("HTTP_ADDR %q: %w", httpAddr, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/readyz", nil
}

// defaultOf is the documented default of a configuration variable.
func defaultOf(name string) string {
	for _, v := range Variables {
		if v.Name == name {
			return v.Default
		}
	}
	return ""
}
