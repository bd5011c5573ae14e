package secrets

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// Keyring liveness: a serving replica refreshes its row every KeyringRefresh; a row not refreshed
// for KeyringLive belongs to a replica that stopped without removing it (killed) and counts no more.
const (
	KeyringRefresh = 10 * time.Second
	KeyringLive    = 3 * KeyringRefresh
)

// IDs are the ids of the box's keys, the sealing one first; nil without keys.
func (b *Box) IDs() []string {
	if !b.Enabled() {
		return nil
	}
	return append([]string(nil), b.ids...)
}

// Has reports whether the box holds key id.
func (b *Box) Has(id string) bool {
	return b != nil && b.aead[id] != nil
}

// MissingKeyError is what Open returns for a value sealed under a key the box does not hold: this
// replica cannot open it, though one configured with the key can.
type MissingKeyError struct{ ID string }

func (e *MissingKeyError) Error() string {
	return fmt.Sprintf("secrets: value sealed with key %q, which KEELSON_ENCRYPTION_KEYS does not hold", e.ID)
}

// Missing returns the ids among ids that the box does not hold.
func (b *Box) Missing(ids []string) []string {
	var out []string
	for _, id := range ids {
		if !b.Has(id) {
			out = append(out, id)
		}
	}
	return out
}

// Announce records (or refreshes) the key ids instance holds in replica_keyrings.
func Announce(ctx context.Context, db *sql.DB, instance string, b *Box) error {
	_, err := db.ExecContext(ctx, `INSERT INTO replica_keyrings (instance_id, key_ids, seen_at)
		VALUES ($1, string_to_array($2, ','), now())
		ON CONFLICT (instance_id) DO UPDATE SET key_ids = EXCLUDED.key_ids, seen_at = EXCLUDED.seen_at`,
		instance, strings.Join(b.IDs(), ","))
	if err != nil {
		return fmt.Errorf("secrets: record this replica's key ids: %w", err)
	}
	return nil
}

// Withdraw removes instance's row, at a clean stop.
func Withdraw(ctx context.Context, db *sql.DB, instance string) error {
	_, err := db.ExecContext(ctx, `DELETE FROM replica_keyrings WHERE instance_id = $1`, instance)
	return err
}

// KeepAnnounced refreshes instance's row every KeyringRefresh until ctx ends, then withdraws it.
// A failed refresh is reported to warn and retried at the next tick: the row lives KeyringLive.
func KeepAnnounced(ctx context.Context, db *sql.DB, instance string, b *Box, warn func(error)) {
	tick := time.NewTicker(KeyringRefresh)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			_ = Withdraw(stopCtx, db, instance)
			return
		case <-tick.C:
			if err := Announce(ctx, db, instance, b); err != nil && ctx.Err() == nil {
				warn(err)
			}
		}
	}
}

// LiveWithout returns the live replicas, other than except, whose keyring lacks key id.
func LiveWithout(ctx context.Context, db *sql.DB, id, except string) ([]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT instance_id FROM replica_keyrings
		WHERE seen_at > now() - make_interval(secs => $1) AND instance_id <> $2 AND NOT ($3 = ANY (key_ids))
		ORDER BY instance_id`, KeyringLive.Seconds(), except, id)
	if err != nil {
		return nil, fmt.Errorf("secrets: read the key ids of live replicas: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var instance string
		if err := rows.Scan(&instance); err != nil {
			return nil, err
		}
		out = append(out, instance)
	}
	return out, rows.Err()
}
