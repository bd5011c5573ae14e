package webhooks

import (
	_ "embed"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/keelson/keelson/platform/httpapi"
	"github.com/keelson/keelson/platform/jobs"
	"github.com/keelson/keelson/platform/module"
)

//go:embed openapi_lifecycle.json
var lifecycleOpenAPI []byte

// registerLifecycle declares bulk recovery (its routes and job kind) and retention (its schedule).
func (m *Module) registerLifecycle(r *module.Registry, svc *Service) error {
	svc.jobs = r.Jobs
	r.Routes(func(api *httpapi.API) { mountLifecycleRoutes(api.RouterGroup.Group("/webhooks"), svc) })
	r.JobKind(jobs.Kind{Name: recoverJob, Handle: svc.runRecovery, Options: jobs.KindOptions{Timeout: 10 * time.Minute}})
	if m.cfg.Retention > 0 {
		r.Schedule(jobs.Schedule{Name: retentionSchedule, Interval: m.cfg.retentionInterval(), Run: svc.Prune})
	}
	r.OpenAPI(lifecycleOpenAPI)
	return nil
}

func mountLifecycleRoutes(g *gin.RouterGroup, s *Service) {
	g.POST("/subscriptions/:id/recover", httpapi.H(func(c *gin.Context) error {
		id, err := httpapi.PathUUID(c, "id")
		if err != nil {
			return err
		}
		var req struct {
			Since *time.Time `json:"since"`
			Until *time.Time `json:"until"`
		}
		if err := httpapi.BindJSON(c, &req); err != nil {
			return err
		}
		op, err := s.Recover(c.Request.Context(), id, RecoverInput{Since: req.Since, Until: req.Until})
		if err != nil {
			return err
		}
		c.Header("Location", httpapi.APIPrefix+"/webhooks/operations/"+op.ID.String())
		c.JSON(http.StatusAccepted, toOperationResponse(op))
		return nil
	}))
	g.GET("/operations/:id", httpapi.H(func(c *gin.Context) error {
		id, err := httpapi.PathUUID(c, "id")
		if err != nil {
			return err
		}
		op, err := s.Operation(c.Request.Context(), id)
		if err != nil {
			return err
		}
		c.JSON(http.StatusOK, toOperationResponse(op))
		return nil
	}))
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
