package webhooks

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/modules/webhooks/internal/egress"
	"github.com/keelson/keelson/modules/webhooks/internal/eventtype"
	"github.com/keelson/keelson/modules/webhooks/internal/signing"
	"github.com/keelson/keelson/platform/apperr"
	"github.com/keelson/keelson/platform/concurrency"
	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/tenancy"
)

const (
	maxURLLength         = 2048
	maxDescriptionLength = 1000
)

// Subscription is a receiver URL, the event types it wants, and the secret its requests are signed with.
// It is persisted as is: the xmin row version travels with the loaded entity to the conditional UPDATE.
type Subscription struct {
	ID uuid.UUID `gorm:"column:id;primaryKey"`
	tenancy.Owned
	URL            string             `gorm:"column:url"`
	EventTypes     patternSet         `gorm:"column:event_types"`
	Description    string             `gorm:"column:description"`
	Enabled        bool               `gorm:"column:enabled"` // kept equal to Status == active for readers of the old column
	Status         SubscriptionStatus `gorm:"column:status"`
	DisabledReason string             `gorm:"column:disabled_reason"`
	// Secret and PreviousSecrets are held as stored: sealed (see sealer), opened only to sign.
	Secret          string          `gorm:"column:secret"`
	PreviousSecrets previousSecrets `gorm:"column:previous_secrets"`
	// PreviousSecretsExpireAt is the earliest expiry of PreviousSecrets, for the schedule that wipes them.
	PreviousSecretsExpireAt *time.Time `gorm:"column:previous_secrets_expire_at"`
	// Headers are sent with every attempt; their values are held sealed like the secret, and shown redacted.
	Headers headerMap `gorm:"column:headers"`
	// RateLimit caps the requests per second sent to it, across replicas; nil = no limit.
	RateLimit *float64 `gorm:"column:rate_limit"`
	// Filter is a CEL expression over the event (expression.go); "" delivers every event its patterns match.
	Filter string `gorm:"column:filter"`
	// ProxyURL is the endpoint's own CONNECT proxy ("" = the deployment's, if any); the TLS fields are
	// its client certificate, its key (sealed like the secret) and the CA bundle it is verified
	// against (egress.go).
	ProxyURL             string `gorm:"column:proxy_url"`
	TLSClientCertificate string `gorm:"column:tls_client_certificate"`
	TLSClientKey         string `gorm:"column:tls_client_key"`
	TLSCABundle          string `gorm:"column:tls_ca_bundle"`
	// Transform is a CEL expression producing the body sent instead of the event\'s ("" = the event\'s).
	Transform string             `gorm:"column:transform"`
	CreatedAt time.Time          `gorm:"column:created_at"`
	UpdatedAt time.Time          `gorm:"column:updated_at"`
	DeletedAt *time.Time         `gorm:"column:deleted_at"`
	Health    SubscriptionHealth `gorm:"-"` // filled by the service's reads

	Version concurrency.RowVersion `gorm:"column:xmin;->;-:migration;default:(-)"`
}

// TableName is the module's table.
func (Subscription) TableName() string { return "webhook_subscriptions" }

// SubscriptionInput creates a subscription. Enabled nil means true; Secret "" means generate one;
// Status "" means active (Enabled false means disabled).
type SubscriptionInput struct {
	URL         string
	EventTypes  []string
	Description string
	Secret      string
	Enabled     *bool
	Status      string
	Headers     map[string]string
	RateLimit   *float64 // requests per second; nil or 0 = no limit
	Filter      string   // a CEL expression over the event; "" = none
	Transform   string   // a CEL expression producing the body sent; "" = the event's
	Egress      EgressInput
}

// SubscriptionPatch changes a subscription; nil fields are left as they are. Enabled true resumes,
// false disables; Status sets active, paused or disabled.
type SubscriptionPatch struct {
	URL         *string
	EventTypes  *[]string
	Description *string
	Enabled     *bool
	Status      *string
	Headers     *map[string]string // replaces the set; an empty map removes them all
	RateLimit   *float64           // requests per second; 0 removes the limit
	Filter      *string            // "" removes the filter
	Transform   *string            // "" sends the event's body again
	Egress      EgressPatch
}

// newSubscription validates the input and returns the subscription, its secret and header values
// sealed, and the secret in plaintext (shown once).
func newSubscription(in SubscriptionInput, now time.Time, targets egress.Policy, seal sealer) (*Subscription, string, error) {
	var v apperr.Validator
	checkErr(&v, "url", validateTargetURL(in.URL, targets))
	patterns, err := eventtype.NormalizePatterns(in.EventTypes)
	checkErr(&v, "event_types", err)
	checkErr(&v, "description", validateDescription(in.Description))
	status := StatusActive
	if in.Enabled != nil && !*in.Enabled {
		status = StatusDisabled
	}
	if in.Status != "" {
		parsed, err := parseSubscriptionStatus(in.Status)
		checkErr(&v, "status", err)
		v.Check(in.Enabled == nil || *in.Enabled == (parsed == StatusActive), "enabled", "contradicts status")
		status = parsed
	}
	headers, err := normalizeHeaders(in.Headers)
	checkErr(&v, "headers", err)
	rate, err := normalizeRateLimit(in.RateLimit)
	checkErr(&v, "rate_limit", err)
	checkErr(&v, "filter", validateExpression(in.Filter, filterExpression))
	checkErr(&v, "transform", validateExpression(in.Transform, transformExpression))
	in.Egress.validate(&v, targets)
	secret := in.Secret
	if secret != "" {
		_, err := signing.SecretKey(secret)
		checkErr(&v, "secret", err)
	}
	if err := v.Err(); err != nil {
		return nil, "", err
	}
	if secret == "" {
		if secret, err = signing.NewSecret(); err != nil {
			return nil, "", err
		}
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, "", fmt.Errorf("subscription id: %w", err)
	}
	sealedSecret, err := seal.sealSecret(id, secret)
	if err != nil {
		return nil, "", err
	}
	if headers, err = seal.sealHeaders(id, headers); err != nil {
		return nil, "", err
	}
	sub := &Subscription{
		ID: id, URL: in.URL, EventTypes: patterns, Description: in.Description,
		Secret: sealedSecret, Headers: headers, RateLimit: rate, Filter: in.Filter, Transform: in.Transform, CreatedAt: now, UpdatedAt: now,
	}
	if err := sub.setEgress(in.Egress, seal); err != nil {
		return nil, "", err
	}
	sub.setStatus(status, manualReason(status))
	return sub, secret, nil
}

// apply validates and applies a patch; new header values are sealed.
func (s *Subscription) apply(p SubscriptionPatch, now time.Time, targets egress.Policy, seal sealer) error {
	var v apperr.Validator
	var patterns []string
	if p.URL != nil {
		checkErr(&v, "url", validateTargetURL(*p.URL, targets))
	}
	if p.EventTypes != nil {
		var err error
		patterns, err = eventtype.NormalizePatterns(*p.EventTypes)
		checkErr(&v, "event_types", err)
	}
	if p.Description != nil {
		checkErr(&v, "description", validateDescription(*p.Description))
	}
	var status SubscriptionStatus
	if p.Enabled != nil {
		status = StatusDisabled
		if *p.Enabled {
			status = StatusActive
		}
	}
	if p.Status != nil {
		parsed, err := parseSubscriptionStatus(*p.Status)
		checkErr(&v, "status", err)
		v.Check(p.Enabled == nil || status == parsed, "enabled", "contradicts status")
		status = parsed
	}
	var headers headerMap
	if p.Headers != nil {
		var err error
		headers, err = normalizeHeaders(*p.Headers)
		checkErr(&v, "headers", err)
	}
	var rate *float64
	if p.RateLimit != nil {
		var err error
		rate, err = normalizeRateLimit(p.RateLimit)
		checkErr(&v, "rate_limit", err)
	}
	if p.Filter != nil {
		checkErr(&v, "filter", validateExpression(*p.Filter, filterExpression))
	}
	if p.Transform != nil {
		checkErr(&v, "transform", validateExpression(*p.Transform, transformExpression))
	}
	p.Egress.validate(&v, targets)
	if err := v.Err(); err != nil {
		return err
	}
	if p.Transform != nil {
		s.Transform = *p.Transform
	}
	if err := s.patchEgress(p.Egress, seal); err != nil {
		return err
	}
	if p.Filter != nil {
		s.Filter = *p.Filter
	}
	if p.Headers != nil {
		sealed, err := seal.sealHeaders(s.ID, headers)
		if err != nil {
			return err
		}
		s.Headers = sealed
	}
	if p.RateLimit != nil {
		s.RateLimit = rate
	}
	if p.URL != nil {
		s.URL = *p.URL
	}
	if p.EventTypes != nil {
		s.EventTypes = patterns
	}
	if p.Description != nil {
		s.Description = *p.Description
	}
	if status != "" && status != s.Status {
		s.setStatus(status, manualReason(status))
	}
	s.UpdatedAt = now
	return nil
}

// rotateSecret replaces the secret and returns the new one in plaintext. The old one keeps signing
// beside it for expirePreviousIn (0: not at all); secrets rotated out earlier keep their own expiry.
func (s *Subscription) rotateSecret(now time.Time, expirePreviousIn time.Duration, seal sealer) (string, error) {
	previous := s.PreviousSecrets.signingAt(now)
	if expirePreviousIn > 0 && len(previous) >= maxPreviousSecrets {
		return "", apperr.StateConflict(CodeTooManySecrets, fmt.Sprintf(
			"%d rotated-out secrets still sign; rotate with expire_previous_in \"0s\" or once one of them expired (at %s)",
			len(previous), previous.earliestExpiry().UTC().Format(time.RFC3339)))
	}
	secret, err := signing.NewSecret()
	if err != nil {
		return "", err
	}
	sealed, err := seal.sealSecret(s.ID, secret)
	if err != nil {
		return "", err
	}
	if expirePreviousIn > 0 {
		previous = append(previousSecrets{{Secret: s.Secret, ExpiresAt: now.Add(expirePreviousIn)}}, previous...)
	}
	s.setPreviousSecrets(previous)
	s.Secret = sealed
	s.UpdatedAt = now
	return secret, nil
}

// setPreviousSecrets replaces the list and keeps its earliest expiry beside it.
func (s *Subscription) setPreviousSecrets(p previousSecrets) {
	if len(p) == 0 {
		p = nil
	}
	s.PreviousSecrets, s.PreviousSecretsExpireAt = p, p.earliestExpiry()
}

// markDeleted hides the subscription and wipes its secrets and header values: nothing is left to leak;
// deliveries already made keep their history.
func (s *Subscription) markDeleted(now time.Time) {
	s.Secret, s.Headers, s.TLSClientKey = "", headerMap{}, ""
	s.setPreviousSecrets(nil)
	s.DeletedAt = &now
	s.Enabled = false
	s.UpdatedAt = now
}

// openSigningKeys opens the secrets and returns the HMAC keys a request is signed with at now (the
// current secret, then each rotated-out one until its expiry) and, for each rotated-out key, that expiry.
func (s *Subscription) openSigningKeys(now time.Time, seal sealer) (keys [][]byte, expiries []time.Time, err error) {
	secret, err := seal.openSecret(s.ID, s.Secret)
	if err != nil {
		return nil, nil, err
	}
	key, err := signing.SecretKey(secret)
	if err != nil {
		return nil, nil, fmt.Errorf("subscription %s: stored secret: %w", s.ID, err)
	}
	keys = [][]byte{key}
	for _, ps := range s.PreviousSecrets.signingAt(now) {
		previous, err := seal.openSecret(s.ID, ps.Secret)
		if err != nil {
			return nil, nil, err
		}
		if prev, err := signing.SecretKey(previous); err == nil {
			keys = append(keys, prev)
			expiries = append(expiries, ps.ExpiresAt)
		}
	}
	return keys, expiries, nil
}

// validateTargetURL accepts absolute http(s) URLs with a host, a port in 1–65535 and no credentials.
// A literal IP that is not public is refused here (unless allowed); host names are judged at dial
// time by the guard.
func validateTargetURL(raw string, targets egress.Policy) error {
	if raw == "" {
		return errors.New("must not be empty")
	}
	if len(raw) > maxURLLength {
		return fmt.Errorf("must be at most %d characters", maxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("must be an absolute URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return errors.New("scheme must be http or https")
	}
	if u.User != nil {
		return errors.New("must not contain user information")
	}
	host := u.Hostname()
	if host == "" {
		return errors.New("must have a host")
	}
	if strings.ContainsAny(raw, " \t\r\n") {
		return errors.New("must not contain whitespace")
	}
	// Escapes in the host let one name be spelled many ways, past any list that compares names.
	if strings.Contains(rawAuthority(raw), "%") {
		return errors.New("must not contain percent-escapes in the host")
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	} else if _, err := egress.ParsePort(port); err != nil {
		return err
	}
	if targets.AllowPrivate || targets.IsAllowedTarget(net.JoinHostPort(host, port)) {
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil && !egress.IsPublicAddress(ip) {
		return errors.New("must not target a private, loopback, link-local or otherwise non-public address (an operator allows one target with WEBHOOKS_ALLOWED_TARGETS=host:port, or every one with WEBHOOKS_ALLOW_PRIVATE_TARGETS=true)")
	}
	return nil
}

// rawAuthority is the user:password@host:port part of a URL as written (url.Parse decodes the host).
func rawAuthority(raw string) string {
	_, rest, _ := strings.Cut(raw, "//")
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

func validateDescription(d string) error {
	if len([]rune(d)) > maxDescriptionLength {
		return fmt.Errorf("must be at most %d characters", maxDescriptionLength)
	}
	return nil
}

// Bounds of a rate limit, in requests per second.
const (
	minRateLimit = 0.1
	maxRateLimit = 10000.0
)

// normalizeRateLimit accepts nil or 0 (no limit) or a rate within bounds.
func normalizeRateLimit(r *float64) (*float64, error) {
	if r == nil || *r == 0 {
		return nil, nil
	}
	if math.IsNaN(*r) || *r < minRateLimit || *r > maxRateLimit {
		return nil, fmt.Errorf("must be 0 (no limit) or from %g to %g requests per second", minRateLimit, maxRateLimit)
	}
	v := *r
	return &v, nil
}

// checkErr records err's message for field when err is not nil.
func checkErr(v *apperr.Validator, field string, err error) {
	if err != nil {
		v.Check(false, field, err.Error())
	}
}

// patternSet is a list of event type patterns stored as a JSON array.
type patternSet []string

// Value stores the list as jsonb.
func (p patternSet) Value() (driver.Value, error) {
	if p == nil {
		return "[]", nil
	}
	b, err := json.Marshal([]string(p))
	return string(b), err
}

// Scan reads the jsonb array.
func (p *patternSet) Scan(src any) error {
	return scanJSONB(src, (*[]string)(p), "event_types")
}

// scanJSONB decodes a jsonb column into dst; NULL leaves dst at its zero value.
func scanJSONB(src, dst any, column string) error {
	switch v := src.(type) {
	case []byte:
		return json.Unmarshal(v, dst)
	case string:
		return json.Unmarshal([]byte(v), dst)
	case nil:
		return json.Unmarshal([]byte("null"), dst)
	default:
		return fmt.Errorf("%s: cannot scan %T", column, src)
	}
}

// CreateSubscription validates and stores a subscription; it returns the secret, shown only now.
// It joins the unit of work in ctx, so an in-process caller can create one within its own transaction.
func (s *Service) CreateSubscription(ctx context.Context, in SubscriptionInput) (Subscription, string, error) {
	sub, secret, err := newSubscription(in, s.now(), s.targets, s.sealer)
	if err != nil {
		return Subscription{}, "", err
	}
	err = s.db.WithTx(ctx, func(ctx context.Context) error {
		if err := s.store.createSubscription(ctx, sub); err != nil {
			return err
		}
		if err := s.enforceSubscriptionQuota(ctx); err != nil {
			return err
		}
		return s.store.createHealth(ctx, sub.ID)
	})
	if err != nil {
		return Subscription{}, "", err
	}
	sub.Health = SubscriptionHealth{SubscriptionID: sub.ID}
	return *sub, secret, nil
}

// Subscription returns one live subscription.
func (s *Service) Subscription(ctx context.Context, id uuid.UUID) (Subscription, error) {
	sub, err := s.store.subscription(ctx, id)
	if err != nil {
		return Subscription{}, err
	}
	if sub.Health, err = s.store.health(ctx, id); err != nil {
		return Subscription{}, err
	}
	return *sub, nil
}

// Subscriptions lists live subscriptions, oldest first, after the given id.
func (s *Service) Subscriptions(ctx context.Context, after uuid.UUID, limit int) ([]Subscription, error) {
	subs, err := s.store.subscriptions(ctx, after, limit)
	if err != nil || len(subs) == 0 {
		return subs, err
	}
	ids := make([]uuid.UUID, len(subs))
	for i := range subs {
		ids[i] = subs[i].ID
	}
	health, err := s.store.healthOf(ctx, ids)
	if err != nil {
		return nil, err
	}
	for i := range subs {
		subs[i].Health = health[subs[i].ID]
		subs[i].Health.SubscriptionID = subs[i].ID
	}
	return subs, nil
}

// UpdateSubscription applies a patch, if the subscription still has the version pre names (If-Match).
// A status change behaves as pause, resume or a manual disable.
func (s *Service) UpdateSubscription(ctx context.Context, id uuid.UUID, p SubscriptionPatch, pre concurrency.Precondition) (Subscription, error) {
	sub, err := database.Update(ctx, s.db, s.subscriptionChange(id, pre, func(ctx context.Context, sub *Subscription) error {
		was := sub.Status
		if err := sub.apply(p, s.now(), s.targets, s.sealer); err != nil {
			return err
		}
		return s.afterStatusChange(ctx, sub, was)
	}))
	s.opened.forget(id) // the row has a new version: its old opened values go now, not at its next send
	return s.withHealth(ctx, sub, err)
}

// RotateSecret replaces the secret and returns the new one; the old one signs beside it for
// expirePreviousIn ("" = 24 h, see parseExpirePreviousIn), and those rotated out before keep their expiry.
func (s *Service) RotateSecret(ctx context.Context, id uuid.UUID, expirePreviousIn string, pre concurrency.Precondition) (Subscription, string, error) {
	ttl, err := parseExpirePreviousIn(expirePreviousIn)
	if err != nil {
		return Subscription{}, "", apperr.Invalid("expire_previous_in", err.Error())
	}
	var secret string
	sub, err := database.Update(ctx, s.db, s.subscriptionChange(id, pre, func(_ context.Context, sub *Subscription) (err error) {
		secret, err = sub.rotateSecret(s.now(), ttl, s.sealer)
		return err
	}))
	s.opened.forget(id)
	out, err := s.withHealth(ctx, sub, err)
	return out, secret, err
}

// DeleteSubscription hides a subscription and cancels its pending deliveries (failed, with the
// reason) in the same unit of work; a send in flight finds its outcome superseded.
func (s *Service) DeleteSubscription(ctx context.Context, id uuid.UUID, pre concurrency.Precondition) error {
	cancelled := 0
	_, err := database.Update(ctx, s.db, s.subscriptionChange(id, pre, func(ctx context.Context, sub *Subscription) (err error) {
		sub.markDeleted(s.now())
		cancelled, err = s.store.cancelPending(ctx, id, s.now(), "cancelled: subscription deleted")
		return err
	}))
	s.opened.forget(id) // its secrets are wiped from the row; other replicas' copies go when idle
	if err == nil && cancelled > 0 {
		s.metrics.deliveries.WithLabelValues("cancelled").Add(float64(cancelled))
	}
	return err
}

// subscriptionChange is the platform's update shape for a live subscription. The row is locked FOR
// UPDATE as it is loaded: a take holds FOR KEY SHARE on it while it checks the status
// (store.takeClaims), so once a change commits no take still sees the old status.
func (s *Service) subscriptionChange(id uuid.UUID, pre concurrency.Precondition, change func(context.Context, *Subscription) error) database.Change[Subscription] {
	return database.Change[Subscription]{
		Load:    func(ctx context.Context) (*Subscription, error) { return s.store.subscriptionForUpdate(ctx, id) },
		Version: func(sub *Subscription) string { return sub.Version.String() },
		If:      pre,
		Apply: func(ctx context.Context, sub *Subscription) error {
			sub.UpdatedAt = s.now()
			return change(ctx, sub)
		},
		Save: s.store.saveSubscription,
	}
}

// withHealth completes a changed subscription with its health for the answer.
func (s *Service) withHealth(ctx context.Context, sub *Subscription, err error) (Subscription, error) {
	if err != nil {
		return Subscription{}, err
	}
	out := deref(sub)
	out.Health, err = s.store.health(ctx, out.ID)
	return out, err
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
