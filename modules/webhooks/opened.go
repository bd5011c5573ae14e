package webhooks

import (
	"sync"
	"time"

	"github.com/keelson/keelson/platform/concurrency"
)

// openedCache keeps each subscription's opened signing keys and header values for its row version,
// so a send decrypts nothing: any change to the row (an edit, a rotation, a secret expiring from
// the list) gives it a new version, which misses and opens afresh.
type openedCache struct{ m sync.Map } // subscription id → *openedSubscription

type openedSubscription struct {
	version  concurrency.RowVersion
	secret   string // the stored value, checked too: a version alone could repeat after xid wraparound
	keys     [][]byte
	expiries []time.Time // of keys[1:], the rotated-out secrets still signing when opened
	headers  headerMap
}

// of returns the keys that sign at now and the plain header values of a taken subscription.
func (c *openedCache) of(sub *Subscription, now time.Time, seal sealer) ([][]byte, headerMap, error) {
	if v, ok := c.m.Load(sub.ID); ok {
		o := v.(*openedSubscription)
		if o.version == sub.Version && o.secret == sub.Secret {
			return o.signingAt(now), o.headers, nil
		}
	}
	keys, expiries, err := sub.openSigningKeys(now, seal)
	if err != nil {
		return nil, nil, err
	}
	headers, err := seal.openHeaders(sub.ID, sub.Headers)
	if err != nil {
		return nil, nil, err
	}
	if sub.Version != 0 { // a subscription read without its version is not cached
		c.m.Store(sub.ID, &openedSubscription{version: sub.Version, secret: sub.Secret, keys: keys, expiries: expiries, headers: headers})
	}
	return keys, headers, nil
}

// signingAt drops the rotated-out keys that expired since they were opened.
func (o *openedSubscription) signingAt(now time.Time) [][]byte {
	for _, at := range o.expiries {
		if !now.Before(at) {
			keys := [][]byte{o.keys[0]}
			for i, at := range o.expiries {
				if now.Before(at) {
					keys = append(keys, o.keys[i+1])
				}
			}
			return keys
		}
	}
	return o.keys
}
