package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/keelson/keelson/console"
	"github.com/keelson/keelson/modules/webhooks"
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
	AuthFailureLimit   int
	AuthFailureWindow  time.Duration
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
	WebhooksEgressProxy         string
	WebhooksSendTimeout         time.Duration
	WebhooksHangAfter           time.Duration
	WebhooksHoldFor             time.Duration
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

	PortalLinkKeys       []string
	PortalPublicURL      string
	PortalFrameAncestors []string

	values map[string]string // each variable as read (or defaulted), for LogValue
}

// Variable is one configuration setting, declared once in Variables: its name, default, meaning
// and how it is read and checked. Everything else derives from the declaration: LoadConfig, the
// `keelson env` file, the table in docs/operations.md (TestTheOperationsTableIsTheDeclarations) and
// the configuration logged at start.
type Variable struct {
	Name    string
	Default string // "" = unset
	Secret  bool   // masked in the start-up log
	// Doc is the meaning, in Markdown, on one line: docs/operations.md shows it as it is, and
	// `keelson env` without link targets.
	Doc string
	// DefaultDoc is what the docs show as the default when it is computed at start (INSTANCE_ID).
	DefaultDoc string
	set        func(c *Config, value string) error
	// check runs once every variable is set, for rules between variables; its error names this one.
	check func(c Config) error
	// show is how the start-up log shows the value; nil = as read, or masked when Secret.
	show func(c Config) string
}

// Variables lists every environment variable the app reads; docker-compose.yml may use no other.
var Variables = []Variable{
	{Name: "DATABASE_URL", Default: "postgres://postgres@127.0.0.1:5432/keelson?sslmode=disable", Secret: true,
		Doc:  "PostgreSQL connection URL",
		set:  func(c *Config, v string) error { return parseURL(v, &c.DatabaseURL, "postgres", "postgresql") },
		show: func(c Config) string { return maskURL(c.DatabaseURL) }},
	intVar("DB_MAX_OPEN_CONNS", "20", 1, 1000, func(c *Config) *int { return &c.DBMaxOpenConns },
		"PostgreSQL connections per replica — the whole budget: HTTP, consumers, outbox forwarders and jobs share them (see [Connection budget](#connection-budget))"),
	boolVar("DATABASE_TRANSACTION_POOLING", "false", func(c *Config) *bool { return &c.DBTransactionPool },
		"`true` when `DATABASE_URL` reaches PostgreSQL through a pooler in transaction mode (PgBouncer `pool_mode=transaction`): no named prepared statements or session settings, migrations lock a table (see [PgBouncer](#pgbouncer))"),
	{Name: "AMQP_URL", Default: "amqp://guest:guest@127.0.0.1:5672/", Secret: true, //nolint:gosec // RabbitMQ's well-known local default
		Doc:  "RabbitMQ connection URL; several comma-separated URLs (the nodes of one cluster) are tried in turn, starting with the one that answered last",
		set:  func(c *Config, v string) error { return parseURLs(v, &c.AMQPURL, "amqp", "amqps") },
		show: func(c Config) string { return maskURLs(c.AMQPURL) }},
	nameVar("AMQP_EXCHANGE", "keelson.events", func(c *Config) *string { return &c.AMQPExchange },
		"topic exchange integration events are published to"),
	nameVar("AMQP_QUEUE_PREFIX", "keelson", func(c *Config) *string { return &c.AMQPQueuePrefix },
		"prefix of every consumer queue (`<prefix>.<consumer>`, `<prefix>.<consumer>.dead`)"),
	enumVar("AMQP_QUEUE_TYPE", "classic", func(c *Config) *string { return &c.AMQPQueueType },
		"`classic` or `quorum`: the type consumer and dead-letter queues are declared with; a queue keeps its type (see [Broker clusters](#broker-clusters-and-quorum-queues))",
		"classic", "quorum"),
	stringVar("HTTP_ADDR", ":8080", func(c *Config) *string { return &c.HTTPAddr }, "HTTP listen address"),
	{Name: "API_TOKENS", Secret: true,
		Doc:  "comma-separated bootstrap bearer tokens: every scope, in the `default` tenant; stored tokens (`keelson tokens create`) work besides them (see [tokens](tokens.md))",
		set:  func(c *Config, v string) error { c.APITokens = splitList(v); return nil },
		show: func(c Config) string { return fmt.Sprintf("%d configured", len(c.APITokens)) }},
	{Name: "API_RATE_LIMIT", Default: "0",
		Doc: "requests each API token may make per window, `N/window` (`6000/1m`), counted across replicas in PostgreSQL; over it: 429 `rate_limited` with `Retry-After`; `0` = no limit (see [rate limits](tokens.md#rate-limits))",
		set: func(c *Config, v string) (err error) {
			c.APIRateLimit, c.APIRateWindow, err = auth.ParseRate(v)
			return err
		}},
	{Name: "API_AUTH_FAILURE_LIMIT", Default: "30/1m",
		Doc: "failed authentications one source address may make per window on one replica, `N/window`; past it that address gets 429 `rate_limited` with `Retry-After` before any token is looked up (tokens the replica already knows valid still pass); `0` = no bound (see [failed authentications](tokens.md#failed-authentications))",
		set: func(c *Config, v string) (err error) {
			c.AuthFailureLimit, c.AuthFailureWindow, err = auth.ParseRate(v)
			if err == nil && c.AuthFailureLimit == 0 {
				c.AuthFailureLimit = -1
			}
			return err
		}},
	stringVar("METRICS_ADDR", "", func(c *Config) *string { return &c.MetricsAddr },
		"serve `/metrics` on this separate address (`127.0.0.1:9090`) instead of on `HTTP_ADDR`, which then has no `/metrics`"),
	{Name: "METRICS_PPROF", Default: "false",
		Doc: "also serve Go's runtime profiles (`/debug/pprof/`: CPU, heap, goroutines) on `METRICS_ADDR`, which it requires; never on `HTTP_ADDR`",
		set: func(c *Config, v string) error { return parseBool(v, &c.MetricsPprof) },
		check: func(c Config) error {
			if c.MetricsPprof && c.MetricsAddr == "" {
				return errors.New("needs METRICS_ADDR (profiles are never served on HTTP_ADDR)")
			}
			return nil
		}},
	{Name: "CORS_ALLOWED_ORIGINS",
		Doc: "comma-separated browser origins (`https://app.example.com`) allowed to call the API cross-origin; none = no CORS headers, browsers refuse cross-origin reads",
		set: func(c *Config, v string) error {
			c.CORSAllowedOrigins = splitList(v)
			for _, o := range c.CORSAllowedOrigins {
				if err := httpapi.CheckOrigin(o); err != nil {
					return err
				}
			}
			return nil
		}},
	{Name: "INSTANCE_ID", DefaultDoc: "hostname:pid", Doc: "worker identity written into claims",
		set: func(c *Config, v string) error {
			if v == "" {
				host, _ := os.Hostname()
				v = fmt.Sprintf("%s:%d", host, os.Getpid())
			}
			c.InstanceID = v
			return nil
		},
		show: func(c Config) string { return c.InstanceID }},
	{Name: "LOG_LEVEL", Default: "info", Doc: "`debug`, `info`, `warn` or `error`",
		set: func(c *Config, v string) error { return c.LogLevel.UnmarshalText([]byte(v)) }},
	enumVar("LOG_FORMAT", "json", func(c *Config) *string { return &c.LogFormat }, "`json` or `text`", "json", "text"),
	{Name: "KEELSON_ENCRYPTION_KEYS", Secret: true,
		Doc:  "comma-separated `id:base64key` AES-256 keys (`openssl rand -base64 32`); the first seals values stored at rest, every one opens (see [Encryption keys](#encryption-keys)); empty = stored unencrypted, with one warning at start",
		set:  func(c *Config, v string) (err error) { c.Secrets, err = secrets.Parse(v); return err },
		show: func(c Config) string { return "current key " + c.Secrets.CurrentKeyID() }},
	durationVar("OUTBOX_POLL_INTERVAL", "250ms", time.Millisecond, func(c *Config) *time.Duration { return &c.OutboxPollInterval },
		"how often an idle outbox forwarder polls for rows other processes wrote (a commit in its own process wakes it at once, so only rows of a stopped replica or a command wait for it; every poll is a transaction)"),
	intVar("JOB_WORKERS", "8", 1, 1000, func(c *Config) *int { return &c.JobWorkers }, "concurrent job handlers per process"),
	durationVar("SHUTDOWN_TIMEOUT", "25s", time.Second, func(c *Config) *time.Duration { return &c.ShutdownTimeout },
		"bound on finishing in-flight work at SIGTERM"),
	boolVar("WEBHOOKS_ALLOW_PRIVATE_TARGETS", "false", func(c *Config) *bool { return &c.WebhooksAllowPrivateTargets },
		"allow loopback/private/link-local webhook URLs (dev and tests: switches the SSRF guard off)"),
	{Name: "WEBHOOKS_ALLOWED_TARGETS",
		Doc: "comma-separated `host:port` targets reached even when private (`receiver:9000` in compose); every other target stays guarded",
		set: func(c *Config, v string) error { return parseHostPorts(v, &c.WebhooksAllowedTargets) }},
	{Name: "WEBHOOKS_EGRESS_PROXY", Secret: true,
		Doc: "HTTP CONNECT proxy every webhook request leaves through, `http://[user:password@]host:port` (static source IPs for receivers' allow-lists); an endpoint's own `proxy_url` replaces it; the SSRF guard still judges each final target; empty = direct",
		set: func(c *Config, v string) error {
			if _, err := webhooks.ParseEgressProxy(v); err != nil {
				return err
			}
			c.WebhooksEgressProxy = v
			return nil
		},
		show: func(c Config) string { return webhooks.RedactedProxy(c.WebhooksEgressProxy) }},
	durationVar("WEBHOOKS_SEND_TIMEOUT", "15s", time.Millisecond, func(c *Config) *time.Duration { return &c.WebhooksSendTimeout },
		"HTTP timeout of one delivery attempt (the low end of the Standard Webhooks recommendation, 15–30 s)"),
	durationVar("WEBHOOKS_HANG_AFTER", "2s", time.Millisecond, func(c *Config) *time.Duration { return &c.WebhooksHangAfter },
		"a request with no response headers after this long, while no other request to its endpoint was answered, holds the endpoint: no more of its deliveries take send slots until that request ends ([fairness](webhooks.md#holding-endpoints-that-hang)); the request itself runs on to the send timeout"),
	durationVar("WEBHOOKS_HOLD_FOR", "30s", time.Second, func(c *Config) *time.Duration { return &c.WebhooksHoldFor },
		"how long an endpoint whose request timed out stays held before one delivery probes it again (the circuit breaker's cool-down)"),
	{Name: "WEBHOOKS_CLAIM_LEASE", Default: "2m",
		Doc: "lease of a delivery claim; must exceed the send timeout by at least 500ms (it covers a take's write and its send)",
		set: func(c *Config, v string) error { return parseDuration(v, time.Millisecond, &c.WebhooksClaimLease) },
		check: func(c Config) error {
			if c.WebhooksClaimLease < c.WebhooksSendTimeout+500*time.Millisecond { // webhooks.Config.Validate's bound, in this config's names
				return errors.New("must exceed WEBHOOKS_SEND_TIMEOUT by at least 500ms (the lease covers a take's write and its send)")
			}
			return nil
		}},
	durationVar("WEBHOOKS_SWEEP_INTERVAL", "5s", time.Millisecond, func(c *Config) *time.Duration { return &c.WebhooksSweepInterval },
		"how often due deliveries (retries, expired claims) are swept"),
	durationVar("WEBHOOKS_RETENTION", "720h", 0, func(c *Config) *time.Duration { return &c.WebhooksRetention },
		"events, finished deliveries and their attempts older than this are pruned (30 days); `0` keeps everything"),
	{Name: "WEBHOOKS_RETRY_SCHEDULE", Default: "5s,5m,30m,2h,5h,10h,10h",
		Doc: "delays after each failed attempt (±20 % jitter); attempts = len+1",
		set: func(c *Config, v string) error { return parseDurations(v, &c.WebhooksRetrySchedule) }},
	durationVar("WEBHOOKS_RETRY_AFTER_MAX", "1h", time.Second, func(c *Config) *time.Duration { return &c.WebhooksRetryAfterMax },
		"cap on a receiver's `Retry-After` (429, 503), which replaces the schedule's delay"),
	durationVar("WEBHOOKS_DISABLE_AFTER", "120h", time.Second, func(c *Config) *time.Duration { return &c.WebhooksDisableAfter },
		"a subscription whose every attempt failed for this long is disabled (reason `failing`)..."),
	intVar("WEBHOOKS_DISABLE_MIN_ATTEMPTS", "10", 1, 1000000, func(c *Config) *int { return &c.WebhooksDisableMinAttempts },
		"...once at least this many attempts in a row failed"),
	intVar("WEBHOOKS_CONCURRENCY", "128", 4, 256, func(c *Config) *int { return &c.WebhooksConcurrency },
		"deliveries one replica handles at once; endpoints not known to be fast get at most three quarters of them (docs/webhooks.md); also the idle keep-alive connections a replica keeps per receiving host (four times that in all)"),
	intVar("WEBHOOKS_ENDPOINT_CONCURRENCY", "32", 1, 256, func(c *Config) *int { return &c.WebhooksEndpointConcurrency },
		"sends in flight to one fast endpoint per replica (× replicas across the deployment); more requests for it wait in its queue, up to 1 s"),
	intVar("WEBHOOKS_MAX_SUBSCRIPTIONS_PER_TENANT", "100", 1, 1000000, func(c *Config) *int { return &c.WebhooksMaxSubscriptions },
		"live webhook subscriptions one tenant may have; a create beyond gets 409 `subscription_quota_exceeded` ([quotas](webhooks.md#quotas))"),
	intVar("WEBHOOKS_MAX_EVENT_BYTES", "262144", 1, 1<<20, func(c *Config) *int { return &c.WebhooksMaxEventBytes },
		"largest `data` of an event posted to `/webhooks/events`, in bytes (at most 1048576, the request body limit); beyond: 413 `payload_too_large`"),
	{Name: "OTEL_EXPORTER_OTLP_ENDPOINT",
		Doc:  "OTLP/HTTP collector base URL (`http://collector:4318`); empty = no spans exported",
		set:  func(c *Config, v string) error { return parseOptionalURL(v, &c.OTelEndpoint, "http", "https") },
		show: func(c Config) string { return maskURL(c.OTelEndpoint) }},
	enumVar("OTEL_TRACES_EXPORTER", "otlp", func(c *Config) *string { return &c.OTelTracesExporter },
		"`otlp`, or `none` to export no spans even with an endpoint", "otlp", "none"),
	nameVar("OTEL_SERVICE_NAME", "keelson", func(c *Config) *string { return &c.OTelServiceName }, "`service.name` of the exported spans"),
	enumVar("OTEL_TRACES_SAMPLER", "parentbased_always_on", func(c *Config) *string { return &c.OTelTracesSampler },
		"OpenTelemetry sampler (`parentbased_traceidratio` with `OTEL_TRACES_SAMPLER_ARG=0.1` keeps 10 %)",
		"always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio"),
	{Name: "ASSISTANT_BASE_URL",
		Doc: "OpenAI-compatible API base URL; empty = the built-in deterministic assistant",
		set: func(c *Config, v string) error { return parseOptionalURL(v, &c.AssistantBaseURL, "http", "https") }},
	{Name: "ASSISTANT_MODEL",
		Doc: "model name sent to the OpenAI-compatible API (required with a base URL)",
		set: func(c *Config, v string) error { c.AssistantModel = v; return nil },
		check: func(c Config) error {
			if c.AssistantBaseURL != "" && c.AssistantModel == "" {
				return errors.New("required when ASSISTANT_BASE_URL is set")
			}
			return nil
		}},
	{Name: "ASSISTANT_API_KEY", Secret: true, Doc: "API key of the OpenAI-compatible API",
		set: func(c *Config, v string) error { c.AssistantAPIKey = v; return nil }},
	durationVar("ASSISTANT_TIMEOUT", "30s", time.Millisecond, func(c *Config) *time.Duration { return &c.AssistantTimeout },
		"timeout of one request to the OpenAI-compatible API"),
	boolVar("CONSOLE_ENABLED", "true", func(c *Config) *bool { return &c.ConsoleEnabled }, "serve the web console at /console/"),
	durationVar("CONSOLE_SESSION_TTL", "8h", time.Minute, func(c *Config) *time.Duration { return &c.ConsoleSessionTTL },
		"how long a console sign-in lasts"),
	{Name: "PORTAL_LINK_KEY", Secret: true,
		Doc: "comma-separated keys of at least 32 bytes (`openssl rand -base64 32`) that sign customer portal links; the first signs, every one verifies; the same on every replica; empty = no portal links (see [portal](portal.md))",
		set: func(c *Config, v string) (err error) {
			c.PortalLinkKeys, err = console.ParsePortalLinkKeys(v)
			return err
		},
		show: func(c Config) string {
			if len(c.PortalLinkKeys) == 0 {
				return ""
			}
			return fmt.Sprintf("%d key(s)", len(c.PortalLinkKeys))
		}},
	{Name: "PORTAL_PUBLIC_URL",
		Doc: "the console's public base URL (`https://webhooks.example.com`) that portal links start with; empty = links are given as a path (`/console/portal/…`)",
		set: func(c *Config, v string) error { return parseOptionalURL(v, &c.PortalPublicURL, "http", "https") }},
	{Name: "PORTAL_FRAME_ANCESTORS",
		Doc: "space- or comma-separated origins (`https://app.example.com`) allowed to show portal sessions in an iframe (CSP `frame-ancestors`); empty = no framing. Over TLS, a framed portal's cookie is `SameSite=None; Secure; Partitioned` (see [portal](portal.md#embedding))",
		set: func(c *Config, v string) error {
			c.PortalFrameAncestors = strings.Fields(strings.ReplaceAll(v, ",", " "))
			for _, o := range c.PortalFrameAncestors {
				if o == "'self'" {
					continue
				}
				if err := httpapi.CheckOrigin(o); err != nil {
					return err
				}
			}
			return nil
		}},
}

// The constructors below declare the common kinds of variable in one line each.

func stringVar(name, def string, field func(*Config) *string, doc string) Variable {
	return Variable{Name: name, Default: def, Doc: doc, set: func(c *Config, v string) error { *field(c) = v; return nil }}
}

func nameVar(name, def string, field func(*Config) *string, doc string) Variable {
	return Variable{Name: name, Default: def, Doc: doc, set: func(c *Config, v string) error { return parseName(v, field(c)) }}
}

func enumVar(name, def string, field func(*Config) *string, doc string, allowed ...string) Variable {
	return Variable{Name: name, Default: def, Doc: doc, set: func(c *Config, v string) error { return parseEnum(v, field(c), allowed...) }}
}

func boolVar(name, def string, field func(*Config) *bool, doc string) Variable {
	return Variable{Name: name, Default: def, Doc: doc, set: func(c *Config, v string) error { return parseBool(v, field(c)) }}
}

func intVar(name, def string, lo, hi int, field func(*Config) *int, doc string) Variable {
	return Variable{Name: name, Default: def, Doc: doc, set: func(c *Config, v string) error { return parseInt(v, lo, hi, field(c)) }}
}

func durationVar(name, def string, minimum time.Duration, field func(*Config) *time.Duration, doc string) Variable {
	return Variable{Name: name, Default: def, Doc: doc, set: func(c *Config, v string) error { return parseDuration(v, minimum, field(c)) }}
}

// LoadConfig reads every variable, applying defaults; the error names the first invalid variable.
// An empty (or blank) variable means its default, as if it were unset: env files and compose
// interpolation write `NAME=` for "nothing to say".
func LoadConfig(getenv func(string) string) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	c := Config{values: make(map[string]string, len(Variables))}
	for _, v := range Variables {
		value := strings.TrimSpace(getenv(v.Name))
		if value == "" {
			value = v.Default
		}
		if err := v.set(&c, value); err != nil {
			return Config{}, fmt.Errorf("invalid %s: %w", v.Name, err)
		}
		c.values[v.Name] = value
	}
	for _, v := range Variables {
		if v.check == nil {
			continue
		}
		if err := v.check(c); err != nil {
			return Config{}, fmt.Errorf("invalid %s: %w", v.Name, err)
		}
	}
	return c, nil
}

// LogValue shows every variable under its name in lower case, secrets masked.
func (c Config) LogValue() slog.Value {
	attrs := make([]slog.Attr, 0, len(Variables))
	for _, v := range Variables {
		value := c.values[v.Name]
		switch {
		case v.show != nil:
			value = v.show(c)
		case v.Secret:
			value = mask(value)
		}
		attrs = append(attrs, slog.String(strings.ToLower(v.Name), value))
	}
	return slog.GroupValue(attrs...)
}

// markdownLink is a Markdown link, whose text alone is kept outside the docs.
var markdownLink = regexp.MustCompile(`\[([^\]]+)\]\([^)]+\)`)

// plainDoc is v's meaning for a comment or a terminal: its links without their targets.
func (v Variable) plainDoc() string { return markdownLink.ReplaceAllString(v.Doc, "$1") }

// printVariables writes an env file: each variable's meaning on a comment line of its own, then
// NAME=default. Values are written as they are, which env-file loaders and `set -a; . file` both
// read unchanged because no default holds a quote, a space, a `$` or a `#`.
func printVariables(w io.Writer) {
	for i, v := range Variables {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "# %s\n%s=%s\n", v.plainDoc(), v.Name, v.Default)
	}
}

// printVariablesTable writes the Markdown table of docs/operations.md.
func printVariablesTable(w io.Writer) {
	fmt.Fprintln(w, "| variable | default | meaning |")
	fmt.Fprintln(w, "|---|---|---|")
	for _, v := range Variables {
		def := "—"
		switch {
		case v.DefaultDoc != "":
			def = v.DefaultDoc
		case v.Default != "":
			def = "`" + v.Default + "`"
		}
		fmt.Fprintf(w, "| `%s` | %s | %s |\n", v.Name, def, v.Doc)
	}
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

// parseOptionalURL is parseURL where empty means "none".
func parseOptionalURL(v string, dst *string, schemes ...string) error {
	if v == "" {
		*dst = ""
		return nil
	}
	return parseURL(v, dst, schemes...)
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
