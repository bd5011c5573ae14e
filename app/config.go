package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/keelson/keelson/platform/auth"
	"github.com/keelson/keelson/platform/httpapi"
	"github.com/keelson/keelson/platform/secrets"
)

// Config is the whole runtime configuration, read from the environment once at start.
type Config struct {
	DatabaseURL        string
	DBMaxOpenConns     int
	DBTransactionPool  bool
	AMQPURL            string
	AMQPExchange       string
	AMQPQueuePrefix    string
	AMQPQueueType      string
	HTTPAddr           string
	APITokens          []string
	APIRateLimit       int
	APIRateWindow      time.Duration
	MetricsAddr        string
	MetricsPprof       bool
	CORSAllowedOrigins []string
	InstanceID         string
	LogLevel           slog.Level
	LogFormat          string
	// Secrets seals what modules store at rest (KEELSON_ENCRYPTION_KEYS).
	Secrets *secrets.Box

	OutboxPollInterval time.Duration
	JobWorkers         int
	ShutdownTimeout    time.Duration

	WebhooksAllowPrivateTargets bool
	WebhooksAllowedTargets      []string
	WebhooksSendTimeout         time.Duration
	WebhooksClaimLease          time.Duration
	WebhooksSweepInterval       time.Duration
	WebhooksRetention           time.Duration
	WebhooksRetrySchedule       []time.Duration
	WebhooksRetryAfterMax       time.Duration
	WebhooksDisableAfter        time.Duration
	WebhooksDisableMinAttempts  int
	WebhooksConcurrency         int
	WebhooksEndpointConcurrency int
	WebhooksMaxSubscriptions    int
	WebhooksMaxEventBytes       int

	OTelTracesExporter string
	OTelEndpoint       string
	OTelServiceName    string
	OTelTracesSampler  string

	AssistantBaseURL string
	AssistantModel   string
	AssistantAPIKey  string
	AssistantTimeout time.Duration

	ConsoleEnabled    bool
	ConsoleSessionTTL time.Duration
}

// Variable is one configuration variable: its name, default and meaning, as documented in docs/operations.md.
type Variable struct {
	Name    string
	Default string
	Secret  bool
	Usage   string
	set     func(c *Config, value string) error
}

// Variables lists every environment variable the app reads; docker-compose.yml may use no other.
var Variables = []Variable{
	{Name: "DATABASE_URL", Default: "postgres://postgres@127.0.0.1:5432/keelson?sslmode=disable", Secret: true, Usage: "PostgreSQL connection URL",
		set: func(c *Config, v string) error { return parseURL(v, &c.DatabaseURL, "postgres", "postgresql") }},
	{Name: "DB_MAX_OPEN_CONNS", Default: "20", Usage: "PostgreSQL connections per replica, all of them: HTTP, consumers, outbox forwarders and jobs share them, two kept for the webhook batch writes (no other connections); keep replicas × this + 2 (migrate) below max_connections",
		set: func(c *Config, v string) error { return parseInt(v, 1, 1000, &c.DBMaxOpenConns) }},
	{Name: "DATABASE_TRANSACTION_POOLING", Default: "false", Usage: "true when DATABASE_URL reaches PostgreSQL through a pooler in transaction mode (PgBouncer pool_mode=transaction): no named prepared statements or session settings, migrations lock a table",
		set: func(c *Config, v string) error { return parseBool(v, &c.DBTransactionPool) }},
	{Name: "AMQP_URL", Default: "amqp://guest:guest@127.0.0.1:5672/", Secret: true, //nolint:gosec // RabbitMQ's well-known local default
		Usage: "RabbitMQ connection URL; comma-separated URLs of a cluster's nodes fail over in turn",
		set:   func(c *Config, v string) error { return parseURLs(v, &c.AMQPURL, "amqp", "amqps") }},
	{Name: "AMQP_EXCHANGE", Default: "keelson.events", Usage: "topic exchange integration events are published to",
		set: func(c *Config, v string) error { return parseName(v, &c.AMQPExchange) }},
	{Name: "AMQP_QUEUE_PREFIX", Default: "keelson", Usage: "prefix of every consumer queue",
		set: func(c *Config, v string) error { return parseName(v, &c.AMQPQueuePrefix) }},
	{Name: "AMQP_QUEUE_TYPE", Default: "classic", Usage: "classic or quorum: the type consumer queues are declared with (fixed once declared)",
		set: func(c *Config, v string) error { return parseEnum(v, &c.AMQPQueueType, "classic", "quorum") }},
	{Name: "HTTP_ADDR", Default: ":8080", Usage: "HTTP listen address",
		set: func(c *Config, v string) error { c.HTTPAddr = v; return nil }},
	{Name: "API_TOKENS", Default: "", Secret: true, Usage: "comma-separated bearer tokens accepted on /api/v1",
		set: func(c *Config, v string) error { c.APITokens = splitList(v); return nil }},
	{Name: "API_RATE_LIMIT", Default: "0", Usage: "requests each API token may make per window, counted across replicas in PostgreSQL: N/window (6000/1m); 0 = no limit; over it: 429 with Retry-After",
		set: func(c *Config, v string) (err error) {
			c.APIRateLimit, c.APIRateWindow, err = auth.ParseRate(v)
			return err
		}},
	{Name: "METRICS_ADDR", Default: "", Usage: "serve /metrics on this separate listen address (127.0.0.1:9090) instead of on HTTP_ADDR; empty = on HTTP_ADDR",
		set: func(c *Config, v string) error { c.MetricsAddr = v; return nil }},
	{Name: "METRICS_PPROF", Default: "false", Usage: "also serve Go's CPU, heap and goroutine profiles at /debug/pprof/ on METRICS_ADDR (required); never on HTTP_ADDR",
		set: func(c *Config, v string) error { return parseBool(v, &c.MetricsPprof) }},
	{Name: "CORS_ALLOWED_ORIGINS", Default: "", Usage: "comma-separated browser origins (https://app.example.com) allowed to call the API; none by default",
		set: func(c *Config, v string) error {
			c.CORSAllowedOrigins = splitList(v)
			for _, o := range c.CORSAllowedOrigins {
				if err := httpapi.CheckOrigin(o); err != nil {
					return err
				}
			}
			return nil
		}},
	{Name: "INSTANCE_ID", Default: "", Usage: "worker identity written into claims (default hostname:pid)",
		set: func(c *Config, v string) error { c.InstanceID = v; return nil }},
	{Name: "LOG_LEVEL", Default: "info", Usage: "debug, info, warn or error",
		set: func(c *Config, v string) error { return c.LogLevel.UnmarshalText([]byte(v)) }},
	{Name: "LOG_FORMAT", Default: "json", Usage: "json or text",
		set: func(c *Config, v string) error { return parseEnum(v, &c.LogFormat, "json", "text") }},
	{Name: "KEELSON_ENCRYPTION_KEYS", Default: "", Secret: true, Usage: "comma-separated id:base64key AES-256 keys (openssl rand -base64 32); the first seals values modules store at rest, all open; empty = stored unencrypted, with a warning",
		set: func(c *Config, v string) (err error) { c.Secrets, err = secrets.Parse(v); return err }},
	{Name: "OUTBOX_POLL_INTERVAL", Default: "250ms", Usage: "how often an idle outbox forwarder polls for rows other processes wrote (a commit in its own process wakes it at once; each poll is a transaction)",
		set: func(c *Config, v string) error { return parseDuration(v, time.Millisecond, &c.OutboxPollInterval) }},
	{Name: "JOB_WORKERS", Default: "8", Usage: "concurrent job handlers per process",
		set: func(c *Config, v string) error { return parseInt(v, 1, 1000, &c.JobWorkers) }},
	{Name: "SHUTDOWN_TIMEOUT", Default: "25s", Usage: "bound on finishing in-flight work at SIGTERM",
		set: func(c *Config, v string) error { return parseDuration(v, time.Second, &c.ShutdownTimeout) }},
	{Name: "WEBHOOKS_ALLOW_PRIVATE_TARGETS", Default: "false", Usage: "allow loopback/private/link-local webhook URLs",
		set: func(c *Config, v string) error { return parseBool(v, &c.WebhooksAllowPrivateTargets) }},
	{Name: "WEBHOOKS_ALLOWED_TARGETS", Default: "", Usage: "comma-separated host:port webhook targets reached even when private",
		set: func(c *Config, v string) error { return parseHostPorts(v, &c.WebhooksAllowedTargets) }},
	{Name: "WEBHOOKS_SEND_TIMEOUT", Default: "15s", Usage: "HTTP timeout of one attempt (Standard Webhooks: 15–30 s)",
		set: func(c *Config, v string) error { return parseDuration(v, time.Millisecond, &c.WebhooksSendTimeout) }},
	{Name: "WEBHOOKS_CLAIM_LEASE", Default: "2m", Usage: "lease of a delivery claim; must exceed the send timeout",
		set: func(c *Config, v string) error { return parseDuration(v, time.Millisecond, &c.WebhooksClaimLease) }},
	{Name: "WEBHOOKS_SWEEP_INTERVAL", Default: "5s", Usage: "how often due deliveries are swept",
		set: func(c *Config, v string) error { return parseDuration(v, time.Millisecond, &c.WebhooksSweepInterval) }},
	{Name: "WEBHOOKS_RETENTION", Default: "720h", Usage: "events, finished deliveries and attempts older than this are pruned (720h = 30 days); 0 keeps everything",
		set: func(c *Config, v string) error { return parseDuration(v, 0, &c.WebhooksRetention) }},
	{Name: "WEBHOOKS_RETRY_SCHEDULE", Default: "5s,5m,30m,2h,5h,10h,10h", Usage: "delays after each failed attempt; attempts = len+1",
		set: func(c *Config, v string) error { return parseDurations(v, &c.WebhooksRetrySchedule) }},
	{Name: "WEBHOOKS_RETRY_AFTER_MAX", Default: "1h", Usage: "cap on a receiver's Retry-After (429, 503) that sets the next attempt",
		set: func(c *Config, v string) error { return parseDuration(v, time.Second, &c.WebhooksRetryAfterMax) }},
	{Name: "WEBHOOKS_DISABLE_AFTER", Default: "120h", Usage: "disable a subscription whose every attempt failed for this long...",
		set: func(c *Config, v string) error { return parseDuration(v, time.Second, &c.WebhooksDisableAfter) }},
	{Name: "WEBHOOKS_DISABLE_MIN_ATTEMPTS", Default: "10", Usage: "...once at least this many attempts failed in a row",
		set: func(c *Config, v string) error { return parseInt(v, 1, 1000000, &c.WebhooksDisableMinAttempts) }},
	{Name: "WEBHOOKS_CONCURRENCY", Default: "128", Usage: "deliveries one replica handles at once (slow endpoints get at most three quarters)",
		set: func(c *Config, v string) error { return parseInt(v, 4, 256, &c.WebhooksConcurrency) }},
	{Name: "WEBHOOKS_ENDPOINT_CONCURRENCY", Default: "32", Usage: "sends in flight to one fast endpoint per replica",
		set: func(c *Config, v string) error { return parseInt(v, 1, 256, &c.WebhooksEndpointConcurrency) }},
	{Name: "WEBHOOKS_MAX_SUBSCRIPTIONS_PER_TENANT", Default: "100", Usage: "live webhook subscriptions one tenant may have (409 subscription_quota_exceeded beyond)",
		set: func(c *Config, v string) error { return parseInt(v, 1, 1000000, &c.WebhooksMaxSubscriptions) }},
	{Name: "WEBHOOKS_MAX_EVENT_BYTES", Default: "262144", Usage: "largest data of an event posted to /webhooks/events, in bytes (413 payload_too_large beyond; at most 1048576)",
		set: func(c *Config, v string) error { return parseInt(v, 1, 1<<20, &c.WebhooksMaxEventBytes) }},
	{Name: "OTEL_EXPORTER_OTLP_ENDPOINT", Default: "", Usage: "OTLP/HTTP collector base URL (http://collector:4318); empty = no spans exported",
		set: func(c *Config, v string) error {
			if v == "" {
				c.OTelEndpoint = ""
				return nil
			}
			return parseURL(v, &c.OTelEndpoint, "http", "https")
		}},
	{Name: "OTEL_TRACES_EXPORTER", Default: "otlp", Usage: "otlp, or none to export no spans even with an endpoint",
		set: func(c *Config, v string) error { return parseEnum(v, &c.OTelTracesExporter, "otlp", "none") }},
	{Name: "OTEL_SERVICE_NAME", Default: "keelson", Usage: "service.name of the exported spans",
		set: func(c *Config, v string) error { return parseName(v, &c.OTelServiceName) }},
	{Name: "OTEL_TRACES_SAMPLER", Default: "parentbased_always_on", Usage: "OpenTelemetry sampler (parentbased_traceidratio with OTEL_TRACES_SAMPLER_ARG=0.1 keeps 10 %)",
		set: func(c *Config, v string) error {
			return parseEnum(v, &c.OTelTracesSampler, "always_on", "always_off", "traceidratio",
				"parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio")
		}},
	{Name: "ASSISTANT_BASE_URL", Default: "", Usage: "OpenAI-compatible API base URL; empty = the built-in assistant",
		set: func(c *Config, v string) error {
			if v == "" {
				c.AssistantBaseURL = ""
				return nil
			}
			return parseURL(v, &c.AssistantBaseURL, "http", "https")
		}},
	{Name: "ASSISTANT_MODEL", Default: "", Usage: "model name sent to the OpenAI-compatible API",
		set: func(c *Config, v string) error { c.AssistantModel = v; return nil }},
	{Name: "ASSISTANT_API_KEY", Default: "", Secret: true, Usage: "API key of the OpenAI-compatible API",
		set: func(c *Config, v string) error { c.AssistantAPIKey = v; return nil }},
	{Name: "ASSISTANT_TIMEOUT", Default: "30s", Usage: "timeout of one request to the OpenAI-compatible API",
		set: func(c *Config, v string) error { return parseDuration(v, time.Millisecond, &c.AssistantTimeout) }},
	{Name: "CONSOLE_ENABLED", Default: "true", Usage: "serve the web console at /console/",
		set: func(c *Config, v string) error { return parseBool(v, &c.ConsoleEnabled) }},
	{Name: "CONSOLE_SESSION_TTL", Default: "8h", Usage: "how long a console sign-in lasts",
		set: func(c *Config, v string) error { return parseDuration(v, time.Minute, &c.ConsoleSessionTTL) }},
}

// LoadConfig reads every variable, applying defaults; the error names the first invalid variable.
// An empty (or blank) variable means its default, as if it were unset: env files and compose
// interpolation write `NAME=` for "nothing to say".
func LoadConfig(getenv func(string) string) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	var c Config
	for _, v := range Variables {
		value := strings.TrimSpace(getenv(v.Name))
		if value == "" {
			value = v.Default
		}
		if err := v.set(&c, value); err != nil {
			return Config{}, fmt.Errorf("invalid %s: %w", v.Name, err)
		}
	}
	if c.InstanceID == "" {
		host, _ := os.Hostname()
		c.InstanceID = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	if c.WebhooksClaimLease < c.WebhooksSendTimeout+500*time.Millisecond { // webhooks.Config.Validate's bound, in this config's names
		return Config{}, errors.New("invalid WEBHOOKS_CLAIM_LEASE: must exceed WEBHOOKS_SEND_TIMEOUT by at least 500ms (the lease covers a take's write and its send)")
	}
	if c.MetricsPprof && c.MetricsAddr == "" {
		return Config{}, errors.New("invalid METRICS_PPROF: needs METRICS_ADDR (profiles are never served on HTTP_ADDR)")
	}
	if c.AssistantBaseURL != "" && c.AssistantModel == "" {
		return Config{}, errors.New("invalid ASSISTANT_MODEL: required when ASSISTANT_BASE_URL is set")
	}
	return c, nil
}

// LogValue masks secrets when the configuration is logged.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("database_url", maskURL(c.DatabaseURL)),
		slog.Int("db_max_open_conns", c.DBMaxOpenConns),
		slog.String("amqp_url", maskURLs(c.AMQPURL)),
		slog.String("amqp_queue_type", c.AMQPQueueType),
		slog.String("amqp_exchange", c.AMQPExchange),
		slog.String("amqp_queue_prefix", c.AMQPQueuePrefix),
		slog.String("http_addr", c.HTTPAddr),
		slog.String("api_tokens", fmt.Sprintf("%d configured", len(c.APITokens))),
		slog.Int("api_rate_limit", c.APIRateLimit),
		slog.Duration("api_rate_window", c.APIRateWindow),
		slog.String("metrics_addr", c.MetricsAddr),
		slog.Bool("metrics_pprof", c.MetricsPprof),
		slog.Any("cors_allowed_origins", c.CORSAllowedOrigins),
		slog.String("instance_id", c.InstanceID),
		slog.String("log_level", c.LogLevel.String()),
		slog.String("log_format", c.LogFormat),
		slog.String("encryption_key", c.Secrets.CurrentKeyID()),
		slog.Duration("outbox_poll_interval", c.OutboxPollInterval),
		slog.Int("job_workers", c.JobWorkers),
		slog.Duration("shutdown_timeout", c.ShutdownTimeout),
		slog.Bool("webhooks_allow_private_targets", c.WebhooksAllowPrivateTargets),
		slog.Any("webhooks_allowed_targets", c.WebhooksAllowedTargets),
		slog.Duration("webhooks_send_timeout", c.WebhooksSendTimeout),
		slog.Duration("webhooks_claim_lease", c.WebhooksClaimLease),
		slog.Duration("webhooks_sweep_interval", c.WebhooksSweepInterval),
		slog.Duration("webhooks_retention", c.WebhooksRetention),
		slog.Any("webhooks_retry_schedule_ms", milliseconds(c.WebhooksRetrySchedule)),
		slog.Duration("webhooks_retry_after_max", c.WebhooksRetryAfterMax),
		slog.Duration("webhooks_disable_after", c.WebhooksDisableAfter),
		slog.Int("webhooks_disable_min_attempts", c.WebhooksDisableMinAttempts),
		slog.Int("webhooks_concurrency", c.WebhooksConcurrency),
		slog.Int("webhooks_endpoint_concurrency", c.WebhooksEndpointConcurrency),
		slog.Int("webhooks_max_subscriptions_per_tenant", c.WebhooksMaxSubscriptions),
		slog.Int("webhooks_max_event_bytes", c.WebhooksMaxEventBytes),
		slog.String("otel_exporter_otlp_endpoint", maskURL(c.OTelEndpoint)),
		slog.String("otel_traces_exporter", c.OTelTracesExporter),
		slog.String("otel_service_name", c.OTelServiceName),
		slog.String("otel_traces_sampler", c.OTelTracesSampler),
		slog.String("assistant_base_url", c.AssistantBaseURL),
		slog.String("assistant_model", c.AssistantModel),
		slog.String("assistant_api_key", mask(c.AssistantAPIKey)),
		slog.Duration("assistant_timeout", c.AssistantTimeout),
		slog.Bool("console_enabled", c.ConsoleEnabled),
		slog.Duration("console_session_ttl", c.ConsoleSessionTTL),
	)
}

func milliseconds(ds []time.Duration) []int64 {
	out := make([]int64, len(ds))
	for i, d := range ds {
		out[i] = d.Milliseconds()
	}
	return out
}

func mask(s string) string {
	if s == "" {
		return ""
	}
	return "****"
}

func maskURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "****"
	}
	return u.Redacted()
}

// maskURLs redacts the passwords of a comma-separated URL list.
func maskURLs(raw string) string {
	parts := strings.Split(raw, ",")
	for i, p := range parts {
		parts[i] = maskURL(strings.TrimSpace(p))
	}
	return strings.Join(parts, ",")
}

// parseURLs accepts one URL or several, comma-separated, each with a host and one of the schemes.
func parseURLs(v string, dst *string, schemes ...string) error {
	parts := splitList(v)
	if len(parts) == 0 {
		return errors.New("not a URL with a host")
	}
	for _, p := range parts {
		var ignored string
		if err := parseURL(p, &ignored, schemes...); err != nil {
			return err
		}
	}
	*dst = strings.Join(parts, ",")
	return nil
}

func parseURL(v string, dst *string, schemes ...string) error {
	u, err := url.Parse(v)
	if err != nil || u.Host == "" {
		return errors.New("not a URL with a host")
	}
	for _, s := range schemes {
		if u.Scheme == s {
			*dst = v
			return nil
		}
	}
	return fmt.Errorf("scheme must be one of %s", strings.Join(schemes, ", "))
}

func parseDuration(v string, minimum time.Duration, dst *time.Duration) error {
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("%q is not a duration like 1500ms or 2m", v)
	}
	if d < minimum {
		return fmt.Errorf("must be at least %s", minimum)
	}
	*dst = d
	return nil
}

func parseDurations(v string, dst *[]time.Duration) error {
	parts := splitList(v)
	if len(parts) == 0 {
		return errors.New("needs at least one duration")
	}
	out := make([]time.Duration, 0, len(parts))
	for _, p := range parts {
		var d time.Duration
		if err := parseDuration(p, time.Millisecond, &d); err != nil {
			return err
		}
		out = append(out, d)
	}
	*dst = out
	return nil
}

func parseInt(v string, lo, hi int, dst *int) error {
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return fmt.Errorf("must be an integer from %d to %d", lo, hi)
	}
	*dst = n
	return nil
}

func parseBool(v string, dst *bool) error {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return fmt.Errorf("%q is not true or false", v)
	}
	*dst = b
	return nil
}

func parseEnum(v string, dst *string, allowed ...string) error {
	for _, a := range allowed {
		if v == a {
			*dst = v
			return nil
		}
	}
	return fmt.Errorf("must be one of %s", strings.Join(allowed, ", "))
}

func parseName(v string, dst *string) error {
	if v == "" || len(v) > 100 || strings.ContainsAny(v, " \t\n") {
		return errors.New("must be a non-empty name without spaces")
	}
	*dst = v
	return nil
}

// parseHostPorts reads a comma-separated list of host:port pairs with ports 1–65535.
func parseHostPorts(v string, dst *[]string) error {
	parts := splitList(v)
	for _, p := range parts {
		host, port, err := net.SplitHostPort(p)
		n, perr := strconv.Atoi(port)
		if err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%q is not host:port with a port from 1 to 65535", p)
		}
	}
	*dst = parts
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
