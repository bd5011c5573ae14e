package webhooks

import (
	"context"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/platform/httpapi"
	"github.com/keelson/keelson/platform/jobs"
	"github.com/keelson/keelson/platform/module"
)

// registerLifecycle declares bulk recovery (its job kind; its routes are mounted with the others) and retention (its schedule).
func (m *Module) registerLifecycle(r *module.Registry, svc *Service) error {
	svc.jobs = r.Jobs
	r.JobKind(jobs.Kind{Name: recoverJob, Handle: svc.runRecovery, Options: jobs.KindOptions{Timeout: 10 * time.Minute}})
	if m.cfg.Retention > 0 {
		r.Schedule(jobs.Schedule{Name: retentionSchedule, Interval: m.cfg.retentionInterval(), Run: svc.Prune})
	}
	return nil
}

// mountLifecycleRoutes declares the recovery routes on the webhooks group (mountRoutes calls it).
func mountLifecycleRoutes(g *httpapi.Group, h handlers) {
	httpapi.Handle(g, httpapi.Route{Method: http.MethodPost, Path: "/subscriptions/{id}/recover", ID: "recoverWebhookSubscription",
		Summary: "Re-queue the subscription's failed deliveries created in [since, until) as a background operation, in batches.",
		Status:  http.StatusAccepted}, h.recoverSubscription)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodGet, Path: "/operations/{id}", ID: "getWebhookOperation",
		Summary: "A background operation: status, counts and progress."}, h.operation)
}

type recoverIn struct {
	ID   uuid.UUID `path:"id"`
	Body struct {
		Since *time.Time `json:"since,omitempty" doc:"default: the retention horizon"`
		Until *time.Time `json:"until,omitempty" doc:"default: now"`
	} `required:"false"`
}

type operationOut struct {
	Location string `header:"Location"`
	Body     operationResponse
}

func (h handlers) recoverSubscription(ctx context.Context, in *recoverIn) (*operationOut, error) {
	op, err := h.s.Recover(ctx, in.ID, RecoverInput{Since: in.Body.Since, Until: in.Body.Until})
	if err != nil {
		return nil, err
	}
	return &operationOut{Location: httpapi.APIPrefix + "/webhooks/operations/" + op.ID.String(), Body: toOperationResponse(op)}, nil
}

func (h handlers) operation(ctx context.Context, in *httpapi.ByID) (*operationOut, error) {
	op, err := h.s.Operation(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	return &operationOut{Body: toOperationResponse(op)}, nil
}

type operationResponse struct {
	ID             uuid.UUID       `json:"id"`
	Kind           string          `json:"kind"`
	SubscriptionID uuid.UUID       `json:"subscription_id"`
	Status         OperationStatus `json:"status"`
	Since          time.Time       `json:"since"`
	Until          *time.Time      `json:"until"`
	Counts         operationCounts `json:"counts"`
	Progress       float64         `json:"progress"`
	Error          *string         `json:"error"`
	CreatedAt      time.Time       `json:"created_at"`
	UpdatedAt      time.Time       `json:"updated_at"`
	FinishedAt     *time.Time      `json:"finished_at"`
}

type operationCounts struct {
	Matched  int `json:"matched"`  // failed deliveries in the window when the operation started
	Requeued int `json:"requeued"` // re-queued so far
}

func toOperationResponse(op Operation) operationResponse {
	utc := func(t *time.Time) *time.Time {
		if t == nil {
			return nil
		}
		u := t.UTC()
		return &u
	}
	return operationResponse{
		ID: op.ID, Kind: op.Kind, SubscriptionID: op.SubscriptionID, Status: op.Status,
		Since: op.Since.UTC(), Until: utc(op.Until),
		Counts:   operationCounts{Matched: op.Total, Requeued: op.Requeued},
		Progress: op.Progress(), Error: nullable(op.Error),
		CreatedAt: op.CreatedAt.UTC(), UpdatedAt: op.UpdatedAt.UTC(), FinishedAt: utc(op.FinishedAt),
	}
}
