package jobs

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics of a Runner. Two runners on one registerer share the collectors.
type metrics struct {
	depth         *prometheus.GaugeVec
	claimsWon     prometheus.Counter
	claimsLost    prometheus.Counter
	leaseExpiries prometheus.Counter
	lostLeases    prometheus.Counter
	duration      *prometheus.HistogramVec
	failures      *prometheus.CounterVec
	scheduleRuns  *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "keelson_jobs_depth", Help: "Jobs by status, sampled.",
		}, []string{"status"}),
		claimsWon: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "keelson_jobs_claims_won_total", Help: "Jobs claimed by this replica.",
		}),
		claimsLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "keelson_jobs_claims_lost_total", Help: "Candidate jobs another worker took before the claim's re-check.",
		}),
		leaseExpiries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "keelson_jobs_lease_expiries_total", Help: "Jobs reclaimed from an expired lease.",
		}),
		lostLeases: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "keelson_jobs_lost_leases_total", Help: "Writes refused by the ownership check: this worker no longer owned the job.",
		}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "keelson_jobs_duration_seconds", Help: "Handler run time by kind.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"kind"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "keelson_jobs_failures_total", Help: "Failed attempts by kind (errors, panics, timeouts).",
		}, []string{"kind"}),
		scheduleRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "keelson_jobs_schedule_runs_total", Help: "Schedule runs by outcome (ok, error, lost).",
		}, []string{"schedule", "outcome"}),
	}
	var err error
	m.depth = register(reg, m.depth, &err)
	m.claimsWon = register(reg, m.claimsWon, &err)
	m.claimsLost = register(reg, m.claimsLost, &err)
	m.leaseExpiries = register(reg, m.leaseExpiries, &err)
	m.lostLeases = register(reg, m.lostLeases, &err)
	m.duration = register(reg, m.duration, &err)
	m.failures = register(reg, m.failures, &err)
	m.scheduleRuns = register(reg, m.scheduleRuns, &err)
	return m, err
}

// exportFromStart creates every known series at zero, so rate() and alerts see them before the
// first failure or run instead of a series appearing out of nothing.
func (m *metrics) exportFromStart(kinds []string, schedules []Schedule) {
	for _, st := range allStatuses() {
		m.depth.WithLabelValues(string(st))
	}
	for _, k := range kinds {
		m.failures.WithLabelValues(k)
		m.duration.WithLabelValues(k)
	}
	for _, s := range schedules {
		for _, outcome := range []string{"ok", "error", "lost"} {
			m.scheduleRuns.WithLabelValues(s.Name, outcome)
		}
	}
}

// register adds c, or returns the collector already registered under its name.
func register[C prometheus.Collector](reg prometheus.Registerer, c C, errp *error) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		*errp = errors.Join(*errp, fmt.Errorf("jobs: metrics: %w", err))
	}
	return c
}
