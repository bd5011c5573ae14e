package tests

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

// TestHealthcheckSubcommandReportsTheReadinessOfTheLocalReplica covers the compose healthcheck: the
// runtime image has no shell or curl, so `keelson healthcheck` probes /readyz of HTTP_ADDR itself.
func TestHealthcheckSubcommandReportsTheReadinessOfTheLocalReplica(t *testing.T) {
	c := newCluster(t, clusterOptions{Replicas: 1})
	healthcheck := func(httpAddr string) (int, string) {
		cmd := exec.Command(keelson(t), "healthcheck")
		// The wildcard listen address of a container is probed on loopback; nothing else is read.
		cmd.Env = append(environ(nil), "HTTP_ADDR="+httpAddr, "DATABASE_URL=", "JOB_WORKERS=not-a-number")
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode(), string(out)
		}
		if err != nil {
			t.Fatalf("keelson healthcheck: %v", err)
		}
		return 0, string(out)
	}

	code, out := healthcheck(fmt.Sprintf(":%d", c.replicas[0].port))
	if code != 0 || !strings.Contains(out, "/readyz 200") {
		t.Fatalf("healthcheck of a ready replica: exit %d\n%s", code, out)
	}
	code, out = healthcheck(fmt.Sprintf("0.0.0.0:%d", freePort(t)))
	if code != 1 || !strings.Contains(out, "healthcheck:") {
		t.Fatalf("healthcheck with nothing listening: exit %d, want 1\n%s", code, out)
	}
}
