package messaging

import (
	"errors"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are owned by one Bus, so two buses in one process register on two registries.
type metrics struct {
	backlog      prometheus.Gauge
	forwardDelay prometheus.Histogram
	forwarded    prometheus.Counter
	handled      *prometheus.CounterVec
	failed       *prometheus.CounterVec
	deadLettered *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		backlog: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "keelson_outbox_backlog",
			Help: "Outbox rows not yet forwarded to RabbitMQ (sampled).",
		}),
		forwardDelay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "keelson_outbox_forward_latency_seconds",
			Help:    "Time from an event's occurred_at to its confirmed publish on RabbitMQ.",
			Buckets: []float64{.005, .01, .02, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}),
		forwarded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "keelson_outbox_forwarded_total",
			Help: "Events published to RabbitMQ and confirmed by the broker.",
		}),
		handled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "keelson_messages_handled_total",
			Help: "Messages a consumer handled successfully.",
		}, []string{"consumer"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "keelson_messages_failed_total",
			Help: "Handler attempts that returned an error or panicked.",
		}, []string{"consumer"}),
		deadLettered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "keelson_messages_dead_lettered_total",
			Help: "Messages moved to a consumer's dead-letter queue after their last failed attempt.",
		}, []string{"consumer"}),
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.backlog, m.forwardDelay, m.forwarded, m.handled, m.failed, m.deadLettered} {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}

// observeForward records the forward latency of a confirmed event.
func (m *metrics) observeForward(msg *message.Message) {
	m.forwarded.Inc()
	if at, err := time.Parse(time.RFC3339Nano, msg.Metadata.Get(HeaderOccurredAt)); err == nil {
		m.forwardDelay.Observe(time.Since(at).Seconds())
	}
}
