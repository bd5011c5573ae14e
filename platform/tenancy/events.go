package tenancy

import (
	"time"

	"github.com/google/uuid"
)

// EventSource is the source of the platform's own integration events.
const EventSource = "platform"

// EventEnabled is published (through the outbox, in the transaction that enables it) when a disabled
// tenant is enabled again, from the API or the CLI alike. It belongs to that tenant, so its consumers
// act for it: modules whose work waited while it was disabled resume it at once instead of at their
// next sweep. Not a public event: it is never a webhook.
const EventEnabled = "tenant.enabled"

// EnabledPayload is EventEnabled's payload.
type EnabledPayload struct {
	TenantID  uuid.UUID `json:"tenant_id"`
	EnabledAt time.Time `json:"enabled_at"`
}
