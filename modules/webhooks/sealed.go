package webhooks

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/platform/secrets"
	"github.com/keelson/keelson/platform/tenancy"
)

// sealer seals a subscription's signing secrets and custom header values before they are stored,
// and opens them only to sign and send. Each value is bound to its subscription's row (and a header
// value to its header's name), so a value copied into another row or header does not open.
// Without keys values are stored as they are; a stored value without the sealed prefix is plaintext
// written before keys were set, and still opens.
type sealer struct{ box *secrets.Box }

func secretAAD(id uuid.UUID) string { return "webhook_subscriptions/" + id.String() + "/secret" }

func headerAAD(id uuid.UUID, name string) string {
	return "webhook_subscriptions/" + id.String() + "/headers/" + name
}

func (s sealer) sealSecret(id uuid.UUID, plain string) (string, error) {
	return s.box.Seal(plain, secretAAD(id))
}

func (s sealer) openSecret(id uuid.UUID, stored string) (string, error) {
	plain, err := s.box.Open(stored, secretAAD(id))
	if err != nil {
		return "", fmt.Errorf("subscription %s: signing secret: %w", id, err)
	}
	return plain, nil
}

// sealHeaders seals each value; names stay readable, so answers can list them redacted.
func (s sealer) sealHeaders(id uuid.UUID, plain headerMap) (headerMap, error) {
	if len(plain) == 0 {
		return plain, nil
	}
	out := make(headerMap, len(plain))
	for name, value := range plain {
		sealed, err := s.box.Seal(value, headerAAD(id, name))
		if err != nil {
			return nil, err
		}
		out[name] = sealed
	}
	return out, nil
}

func (s sealer) openHeaders(id uuid.UUID, stored headerMap) (headerMap, error) {
	if len(stored) == 0 {
		return stored, nil
	}
	out := make(headerMap, len(stored))
	for name, value := range stored {
		plain, err := s.box.Open(value, headerAAD(id, name))
		if err != nil {
			return nil, fmt.Errorf("subscription %s: header %s: %w", id, name, err)
		}
		out[name] = plain
	}
	return out, nil
}

// reseal rewrites one stored value under the current key; unchanged when it already is.
func (s sealer) reseal(stored, aad string) (string, error) {
	if s.box.Current(stored) {
		return stored, nil
	}
	plain, err := s.box.Open(stored, aad)
	if err != nil {
		return "", err
	}
	return s.box.Seal(plain, aad)
}

// resealSubscriptions is `keelson secrets reencrypt` for the module: it seals, under the current key,
// the secrets, header values and TLS client keys of at most batch subscriptions still holding plaintext or values
// under an older key, and returns how many rows it rewrote (0 = none left). Rows are locked while
// rewritten, so a concurrent rotation or change waits and then sees the resealed values.
func (s *Service) resealSubscriptions(ctx context.Context, batch int) (int, error) {
	if !s.sealer.box.Enabled() {
		return 0, nil
	}
	ctx = tenancy.System(ctx, "secrets reencrypt") // every tenant's subscriptions
	prefix := s.sealer.box.CurrentPrefix()
	rewritten := 0
	err := s.db.WithTx(ctx, func(ctx context.Context) error {
		var rows []Subscription
		err := s.store.conn(ctx).Raw(`SELECT id, secret, previous_secrets, headers, tls_client_key FROM webhook_subscriptions
			WHERE (secret <> '' AND NOT starts_with(secret, @prefix))
				OR (tls_client_key <> '' AND NOT starts_with(tls_client_key, @prefix))
				OR EXISTS (SELECT 1 FROM jsonb_array_elements(previous_secrets) p WHERE NOT starts_with(p->>'secret', @prefix))
				OR EXISTS (SELECT 1 FROM jsonb_each_text(headers::jsonb) h WHERE NOT starts_with(h.value, @prefix))
			ORDER BY id LIMIT @batch FOR UPDATE`, sql.Named("prefix", prefix), sql.Named("batch", batch)).Scan(&rows).Error
		if err != nil {
			return err
		}
		for _, row := range rows {
			if err := s.resealRow(ctx, row); err != nil {
				return fmt.Errorf("subscription %s: %w", row.ID, err)
			}
		}
		rewritten = len(rows)
		return nil
	})
	return rewritten, err
}

func (s *Service) resealRow(ctx context.Context, row Subscription) error {
	secret, err := s.sealer.reseal(row.Secret, secretAAD(row.ID))
	if err != nil {
		return err
	}
	previous := make(previousSecrets, len(row.PreviousSecrets))
	for i, ps := range row.PreviousSecrets {
		previous[i] = ps
		if previous[i].Secret, err = s.sealer.reseal(ps.Secret, secretAAD(row.ID)); err != nil {
			return err
		}
	}
	headers := make(headerMap, len(row.Headers))
	for name, value := range row.Headers {
		if headers[name], err = s.sealer.reseal(value, headerAAD(row.ID, name)); err != nil {
			return err
		}
	}
	tlsKey := row.TLSClientKey
	if tlsKey != "" {
		if tlsKey, err = s.sealer.reseal(tlsKey, tlsKeyAAD(row.ID)); err != nil {
			return err
		}
	}
	return s.store.conn(ctx).Exec(`UPDATE webhook_subscriptions SET secret = ?, previous_secrets = ?, headers = ?, tls_client_key = ? WHERE id = ?`,
		secret, previous, headers, tlsKey, row.ID).Error
}

// secretExpirySchedule wipes rotated-out secrets once they stopped signing.
const secretExpirySchedule = "webhooks.expire_secrets"

// secretExpiryInterval is how long an expired secret may stay stored: it no longer signs meanwhile.
const secretExpiryInterval = time.Minute

const secretExpiryBatch = 1000

// WipeExpiredSecrets removes, from every subscription, the rotated-out secrets whose expiry passed,
// in batches; a row a change holds is skipped and left to the next run. The row's version changes,
// so a write with an older If-Match gets 412 as after any change.
func (s *Service) WipeExpiredSecrets(ctx context.Context) error {
	ctx = tenancy.System(ctx, "expire rotated-out secrets")
	for {
		n, err := s.wipeExpiredSecretsBatch(ctx, s.now(), secretExpiryBatch)
		if err != nil || n < secretExpiryBatch {
			return err
		}
	}
}

func (s *Service) wipeExpiredSecretsBatch(ctx context.Context, now time.Time, batch int) (int, error) {
	res := s.store.conn(ctx).Exec(`WITH due AS (
		SELECT id FROM webhook_subscriptions WHERE previous_secrets_expire_at <= @now
		ORDER BY previous_secrets_expire_at LIMIT @batch FOR UPDATE SKIP LOCKED),
	kept AS (
		SELECT s.id, coalesce(jsonb_agg(p ORDER BY o) FILTER (WHERE (p->>'expires_at')::timestamptz > @now), '[]') AS list,
			min((p->>'expires_at')::timestamptz) FILTER (WHERE (p->>'expires_at')::timestamptz > @now) AS next
		FROM webhook_subscriptions s JOIN due USING (id)
		LEFT JOIN LATERAL jsonb_array_elements(s.previous_secrets) WITH ORDINALITY AS e(p, o) ON true
		GROUP BY s.id)
	UPDATE webhook_subscriptions s SET previous_secrets = kept.list, previous_secrets_expire_at = kept.next
	FROM kept WHERE s.id = kept.id`, sql.Named("now", now), sql.Named("batch", batch))
	return int(res.RowsAffected), res.Error
}
