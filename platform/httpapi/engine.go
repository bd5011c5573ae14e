package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/trace"

	"github.com/keelson/keelson/platform/auth"
	"github.com/keelson/keelson/platform/database"
)

// APIPrefix is where the authenticated module routes live.
const APIPrefix = "/api/v1"

// Options are the dependencies of the HTTP engine.
type Options struct {
	// Logger receives the access log, masked 500s and recovered panics. Required.
	Logger *slog.Logger
	// Tokens are the bootstrap bearer tokens (API_TOKENS): every scope, default tenant. Used when Auth is nil.
	Tokens []string
	// Auth resolves bearer tokens (stored ones and the bootstrap ones); nil = Tokens only, no tenant state.
	Auth *auth.Authenticator
	// RateLimit counts each authenticated request of a token; nil = no limit.
	RateLimit RateLimiter
	// AuthFailureLimit failed authentications per AuthFailureWindow from one source address make
	// this replica answer that address 429 before looking tokens up; 0 = DefaultAuthFailureLimit
	// per DefaultAuthFailureWindow, negative = no bound.
	AuthFailureLimit  int
	AuthFailureWindow time.Duration
	// Metrics registers the HTTP metrics and is served on /metrics. Required.
	Metrics MetricsRegistry
	// MetricsElsewhere leaves /metrics off this engine (and its document): a separate listener serves it (METRICS_ADDR).
	MetricsElsewhere bool
	// Ready are the /readyz checks by name (e.g. "postgres", "rabbitmq").
	Ready map[string]func(ctx context.Context) error
	// ReadyTimeout bounds /readyz; zero means DefaultReadyTimeout.
	ReadyTimeout time.Duration
	// ConflictCodes maps a table ("proposals") to the code and detail of its 409 instead of concurrency_conflict.
	ConflictCodes map[string]ConflictAnswer
	// CORSAllowedOrigins are the browser origins (https://app.example.com) allowed to call the
	// API cross-origin; none means no CORS headers at all.
	CORSAllowedOrigins []string
	// DB keeps Idempotency-Key claims and stored responses; nil leaves the header unhandled.
	DB *database.DB
	// TracerProvider records a span per request; nil means tracing is off (traceparent is still
	// read, for logs and events).
	TracerProvider trace.TracerProvider
	// Events lists the public events the document's "webhooks" section describes; nil = none.
	Events func() []EventDoc
}

// NewEngine builds the gin engine with the middleware, the operations endpoints (/healthz, /readyz,
// /metrics, /openapi.json) and the problem+json answers for unknown routes. It returns the engine and
// the authenticated /api/v1 group on which modules declare their routes.
func NewEngine(opts Options) (*gin.Engine, *API, error) {
	if opts.Logger == nil {
		return nil, nil, errors.New("httpapi: nil Logger")
	}
	if opts.Metrics == nil {
		return nil, nil, errors.New("httpapi: nil Metrics")
	}
	for name, check := range opts.Ready {
		if check == nil {
			return nil, nil, errors.New("httpapi: nil ready check " + name)
		}
	}
	authn := opts.Auth
	if authn == nil {
		var err error
		if authn, err = auth.NewAuthenticator(auth.AuthenticatorOptions{BootstrapTokens: opts.Tokens}); err != nil {
			return nil, nil, err
		}
	}
	authenticate := &authenticator{auth: authn, limit: opts.RateLimit, failures: &failureLog{logger: opts.Logger},
		guard: newFailureLimiter(opts.AuthFailureLimit, opts.AuthFailureWindow)}
	metrics, err := newHTTPMetrics(opts.Metrics)
	if err != nil {
		return nil, nil, err
	}
	corsMiddleware, err := cors(opts.CORSAllowedOrigins)
	if err != nil {
		return nil, nil, err
	}
	readyTimeout := opts.ReadyTimeout
	if readyTimeout <= 0 {
		readyTimeout = DefaultReadyTimeout
	}
	render := &renderer{logger: opts.Logger, conflictCodes: maps.Clone(opts.ConflictCodes)}

	// Release mode keeps gin's debug route listing and warnings out of the logs.
	if gin.Mode() != gin.ReleaseMode {
		gin.SetMode(gin.ReleaseMode)
	}
	engine := gin.New()
	engine.ContextWithFallback = true // handlers may pass *gin.Context where a context.Context is due
	engine.RedirectTrailingSlash = false
	engine.RedirectFixedPath = false
	engine.HandleMethodNotAllowed = false // an unknown method on a known path is 404 like any unknown route
	if err := engine.SetTrustedProxies(nil); err != nil {
		return nil, nil, err
	}

	// The span is opened before the access log and the metrics, so their lines carry its trace id.
	engine.Use(withRenderer(render), requestID(), tracing(opts.TracerProvider), metrics.middleware(), accessLog(opts.Logger),
		recovery(opts.Logger), corsMiddleware, bodyLimit())
	engine.NoRoute(func(c *gin.Context) {
		if c.Request.Method == http.MethodHead {
			serveHeadAsGet(engine, c)
			return
		}
		// Under /api/v1 the token is checked first, so unknown routes reveal nothing to strangers.
		if isAPIPath(c.Request.URL.Path) {
			if _, ok := authenticate.principal(c); !ok {
				return
			}
		}
		writeProblem(c, withType(Problem{Status: http.StatusNotFound, Code: CodeNotFound,
			Detail: "no route matches " + c.Request.Method + " " + c.Request.URL.Path}))
	})

	engine.GET("/healthz", healthz)
	engine.GET("/readyz", readyz(opts.Ready, readyTimeout, opts.Logger))
	if !opts.MetricsElsewhere {
		engine.GET("/metrics", metricsHandler(opts.Metrics))
	}
	api := &API{}
	api.RouterGroup = engine.Group(APIPrefix, authenticate.middleware(), api.undeclaredScopes(), jsonGuard())
	if opts.DB != nil {
		api.Use((&idempotency{db: opts.DB}).middleware())
	}
	// Built at the first request, once every module has declared its routes.
	document := sync.OnceValues(func() ([]byte, error) {
		var events []EventDoc
		if opts.Events != nil {
			events = opts.Events()
		}
		doc, err := api.Document(events)
		if err != nil || !opts.MetricsElsewhere {
			return doc, err
		}
		return withoutPath(doc, "/metrics")
	})
	engine.GET("/openapi.json", H(func(c *gin.Context) error {
		doc, err := document()
		if err != nil {
			return err
		}
		c.Data(http.StatusOK, "application/json", doc)
		return nil
	}))
	return engine, api, nil
}

func isAPIPath(p string) bool {
	return p == APIPrefix || strings.HasPrefix(p, APIPrefix+"/")
}
