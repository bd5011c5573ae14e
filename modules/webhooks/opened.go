package webhooks

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/modules/webhooks/internal/signing"
	"github.com/keelson/keelson/platform/concurrency"
)

// Bounds of the opened cache: plaintext keys stay in memory only while they are in use.
const (
	openedMax        = 10_000           // entries kept at most; past it the least recently used quarter goes
	openedIdle       = 10 * time.Minute // an entry no send used for this long goes
	openedPruneEvery = time.Minute      // how often the replica's loop (and sends) look for idle entries
)

// openedCache keeps subscriptions' opened keys and headers per row version, so a send decrypts nothing
// and any change to the row misses; entries go when forgotten here, idle (openedIdle) or least recently used.
type openedCache struct {
	m         sync.Map      // subscription id → *openedSubscription
	size      atomic.Int64  // entries in m
	max       int           // 0 = openedMax
	nextPrune atomic.Int64  // unix nanoseconds from which the next send looks for idle entries
	pruning   sync.Mutex    // one prune or shrink at a time; sends never wait for it
	forgets   atomic.Uint64 // forget calls so far: a send reads it before its row (forgetsSeen)
}

type openedSubscription struct {
	version  concurrency.RowVersion
	secret   string // the stored value, checked too: a version alone could repeat after xid wraparound
	keys     []signing.Key
	expiries []time.Time // of keys[1:], the rotated-out secrets still signing when opened
	headers  headerMap
	used     atomic.Int64 // unix nanoseconds of the last send using it, refreshed at most once a second
}

// forgetsSeen is read before a subscription's row: of stores nothing opened from a row read before a forget.
func (c *openedCache) forgetsSeen() uint64 { return c.forgets.Load() }

// of returns the keys that sign at now and the plain header values of a taken subscription, read
// when forgetsSeen returned seen.
func (c *openedCache) of(sub *Subscription, now time.Time, seal sealer, seen uint64) ([]signing.Key, headerMap, error) {
	at := now.UnixNano()
	if at >= c.nextPrune.Load() {
		c.pruneIdle(at)
	}
	if v, ok := c.m.Load(sub.ID); ok {
		o := v.(*openedSubscription)
		if o.version == sub.Version && o.secret == sub.Secret {
			if at-o.used.Load() > int64(time.Second) {
				o.used.Store(at)
			}
			return o.signingAt(now), o.headers, nil
		}
	}
	secrets, expiries, err := sub.openSigningKeys(now, seal)
	if err != nil {
		return nil, nil, err
	}
	keys := signing.KeysOf(secrets)
	headers, err := seal.openHeaders(sub.ID, sub.Headers)
	if err != nil {
		return nil, nil, err
	}
	if sub.Version != 0 { // a subscription read without its version is not cached
		o := &openedSubscription{version: sub.Version, secret: sub.Secret, keys: keys, expiries: expiries, headers: headers}
		o.used.Store(at)
		if _, replaced := c.m.Swap(sub.ID, o); !replaced && c.size.Add(1) > int64(c.limit()) {
			c.shrink()
		}
		// Checked after the store: a forget since the read either removed o already or is seen here.
		if c.forgets.Load() != seen {
			c.drop(sub.ID, o)
		}
	}
	return keys, headers, nil
}

// forget drops a subscription's opened keys and headers (it was changed or deleted here).
func (c *openedCache) forget(id uuid.UUID) {
	c.forgets.Add(1) // before the delete, so a send storing after it sees the count move
	if _, ok := c.m.LoadAndDelete(id); ok {
		c.size.Add(-1)
	}
}

func (c *openedCache) limit() int {
	if c.max > 0 {
		return c.max
	}
	return openedMax
}

// drop removes the entry k held as v, unless a send replaced it meanwhile.
func (c *openedCache) drop(k, v any) {
	if c.m.CompareAndDelete(k, v) {
		c.size.Add(-1)
	}
}

// pruneLoop drops idle entries every interval until ctx ends, so keys a replica stopped sending
// with leave its memory too; every replica runs it (module.Loop).
func (c *openedCache) pruneLoop(ctx context.Context, every time.Duration, now func() time.Time) error {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			c.pruneIdle(now().UnixNano())
		}
	}
}

// pruneIdle drops the entries no send used in openedIdle before at; one send a minute pays for it.
func (c *openedCache) pruneIdle(at int64) {
	if !c.pruning.TryLock() {
		return
	}
	defer c.pruning.Unlock()
	if at < c.nextPrune.Load() {
		return
	}
	c.nextPrune.Store(at + int64(openedPruneEvery))
	c.m.Range(func(k, v any) bool {
		if at-v.(*openedSubscription).used.Load() > int64(openedIdle) {
			c.drop(k, v)
		}
		return true
	})
}

// shrink drops the least recently used entries down to three quarters of the limit, so the next
// shrink is a quarter of the limit's inserts away.
func (c *openedCache) shrink() {
	if !c.pruning.TryLock() {
		return
	}
	defer c.pruning.Unlock()
	type entry struct {
		k, v any
		used int64
	}
	var all []entry
	c.m.Range(func(k, v any) bool {
		all = append(all, entry{k, v, v.(*openedSubscription).used.Load()})
		return true
	})
	excess := len(all) - c.limit()*3/4
	if excess <= 0 {
		return
	}
	slices.SortFunc(all, func(a, b entry) int { return cmp.Compare(a.used, b.used) })
	for _, e := range all[:excess] {
		c.drop(e.k, e.v)
	}
}

// signingAt drops the rotated-out keys that expired since they were opened.
func (o *openedSubscription) signingAt(now time.Time) []signing.Key {
	if !slices.ContainsFunc(o.expiries, func(at time.Time) bool { return !now.Before(at) }) {
		return o.keys // nothing expired: the cached slice itself
	}
	keys := []signing.Key{o.keys[0]}
	for i, at := range o.expiries {
		if now.Before(at) {
			keys = append(keys, o.keys[i+1])
		}
	}
	return keys
}
