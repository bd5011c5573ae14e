package retention

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
)

func TestTheIdBoundOfATimeIsAboveEveryV7IdMintedByThenAndNotAboveLaterOnes(t *testing.T) {
	for range 100 {
		id := uuid.Must(uuid.NewV7())
		sec, nsec := id.Time().UnixTime()
		minted := time.Unix(sec, nsec)
		by, before := v7After(minted), v7After(minted.Add(-time.Millisecond))
		assert.Negative(t, bytes.Compare(id[:], by[:]), "minted at %s", minted)
		assert.GreaterOrEqual(t, bytes.Compare(id[:], before[:]), 0, "minted after %s", minted.Add(-time.Millisecond))
	}
}
