// Package proposals is the assistant-proposals module: actions proposed by the assistant wait here
// for the user's decision. status is the concurrency token, so of two decisions only the first
// counts; accepted proposals are applied by the module owning the data, which reports back.
package proposals

import (
	"io/fs"

	"github.com/keelson/keelson/migrations"
	"github.com/keelson/keelson/modules/proposals/contract"
	"github.com/keelson/keelson/platform/module"
)

// ModuleName names the module, its migrations and its event source.
const ModuleName = "proposals"

// ConflictCode is the problem code of a decision on a proposal that is no longer pending.
const ConflictCode = "proposal_already_decided"

// Module is the proposals module.
type Module struct{ service *Service }

// New builds the module.
func New() *Module { return &Module{} }

// Name implements module.Module.
func (m *Module) Name() string { return ModuleName }

// Migrations implements module.Module.
func (m *Module) Migrations() fs.FS { return migrations.For(ModuleName) }

// Service is the application service, for in-process callers; set by Register.
func (m *Module) Service() *Service { return m.service }

// Register mounts the routes, the two consumers and the 409 code of a second decision.
func (m *Module) Register(r *module.Registry) error {
	if err := r.Requires("DB", "Events", "Logger"); err != nil {
		return err
	}
	m.service = newService(r.DB, r.Events, r.Logger)
	h := &handlers{service: m.service}
	r.Routes(h.mount)
	r.PublicEvents(contract.Events...)
	for _, s := range m.service.subscriptions() {
		r.Subscribe(s)
	}
	// The plugin names the Go type of the entity whose token moved: Proposal.
	r.ConflictCode(Table, ConflictCode, "the proposal was already decided")
	return nil
}
