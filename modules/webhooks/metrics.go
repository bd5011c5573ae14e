package webhooks

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the module's Prometheus series.
type metrics struct {
	deliveries *prometheus.CounterVec   // outcome of each recorded attempt or give-up
	latency    *prometheus.HistogramVec // duration of each HTTP attempt
	backlog    prometheus.Gauge         // due pending deliveries seen by the last sweep
	stale      prometheus.Counter       // requests dropped: their claim no longer current or already taken
	putBack    *prometheus.CounterVec   // requests put back to wait, by reason
	held       prometheus.Counter       // endpoints held because a request to them hung
	filtered   *prometheus.CounterVec   // deliveries a subscription's filter left out at fan-out, by result
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "keelson", Subsystem: "webhooks", Name: "delivery_outcomes_total",
			Help: "Delivery attempts recorded, by outcome: succeeded, retrying, failed (schedule exhausted), cancelled (subscription gone), dropped (lost to a redelivery).",
		}, []string{"outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "keelson", Subsystem: "webhooks", Name: "attempt_duration_seconds",
			Help:    "Duration of webhook HTTP attempts, by result (ok or the error class).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"result"}),
		backlog: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "keelson", Subsystem: "webhooks", Name: "due_backlog",
			Help: "Pending deliveries whose next attempt was due at the last sweep.",
		}),
		stale: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "keelson", Subsystem: "webhooks", Name: "stale_requests_total",
			Help: "Delivery requests ignored because their claim was no longer current or was already taken by another copy.",
		}),
		putBack: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "keelson", Subsystem: "webhooks", Name: "put_back_total",
			Help: "Delivery requests put back to wait without an attempt, by reason: rate_limit (its slot is further than the horizon), rate_limit_late (its slot passed before the send), and the send gate's refusals: endpoint_busy (a fast endpoint at its cap), endpoint_probing (an endpoint this replica does not know yet, waiting for a probe place or its probe), endpoint_slow (a slow endpoint at its cap, or the slow half full); endpoint_hanging (a send to its endpoint has had no answer for 2 s: nothing is written, the claim's lease runs out while the endpoint is held); key_missing (this replica lacks a key the subscription's values are sealed under).",
		}, []string{"reason"}),
		held: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "keelson", Subsystem: "webhooks", Name: "endpoints_held_total",
			Help: "Times a request had no response headers after WEBHOOKS_HANG_AFTER while its endpoint answered nothing else, so the endpoint was held until the request ended.",
		}),
		filtered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "keelson", Subsystem: "webhooks", Name: "filtered_out_total",
			Help: "Deliveries not made because the subscription's filter did not accept the event, by result: false, or error (the expression failed on it: a missing field, a type mismatch, the cost limit).",
		}, []string{"result"}),
	}
	for _, c := range []prometheus.Collector{m.deliveries, m.latency, m.backlog, m.stale, m.putBack, m.held, m.filtered} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	// Exported at zero from start, so rate() and alerts see the series before the first event.
	for _, o := range []string{"succeeded", "retrying", "failed", "cancelled", "dropped"} {
		m.deliveries.WithLabelValues(o)
	}
	m.latency.WithLabelValues("ok")
	return m, nil
}

func (m *metrics) outcome(o string) { m.deliveries.WithLabelValues(o).Inc() }

func (m *metrics) observeAttempt(r sendResult) {
	result := "ok"
	if !r.Succeeded() {
		result = r.ErrorClass
	}
	m.latency.WithLabelValues(result).Observe(r.Duration.Seconds())
}
