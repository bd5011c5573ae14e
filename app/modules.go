package main

import (
	"github.com/keelson/keelson/modules/conversations"
	"github.com/keelson/keelson/modules/conversations/assistant"
	"github.com/keelson/keelson/modules/proposals"
	"github.com/keelson/keelson/modules/webhooks"
	"github.com/keelson/keelson/platform/module"
)

// modules is the list of modules this binary runs, in wiring order. Adding a module is its import
// and one entry in the list returned here.
func modules(cfg Config) ([]module.Module, error) {
	wh, err := webhooks.New(webhooks.Config{
		AllowPrivateTargets:       cfg.WebhooksAllowPrivateTargets,
		AllowedTargets:            cfg.WebhooksAllowedTargets,
		EgressProxy:               cfg.WebhooksEgressProxy,
		SendTimeout:               cfg.WebhooksSendTimeout,
		HangAfter:                 cfg.WebhooksHangAfter,
		HoldFor:                   cfg.WebhooksHoldFor,
		ClaimLease:                cfg.WebhooksClaimLease,
		SweepInterval:             cfg.WebhooksSweepInterval,
		Retention:                 cfg.WebhooksRetention,
		RetrySchedule:             cfg.WebhooksRetrySchedule,
		RetryAfterMax:             cfg.WebhooksRetryAfterMax,
		DisableAfter:              cfg.WebhooksDisableAfter,
		DisableMinAttempts:        cfg.WebhooksDisableMinAttempts,
		Concurrency:               cfg.WebhooksConcurrency,
		EndpointConcurrency:       cfg.WebhooksEndpointConcurrency,
		MaxSubscriptionsPerTenant: cfg.WebhooksMaxSubscriptions,
		MaxEventBytes:             cfg.WebhooksMaxEventBytes,
	})
	if err != nil {
		return nil, err
	}
	conv, err := conversations.New(conversations.Config{
		OpenAI: assistant.OpenAIConfig{
			BaseURL: cfg.AssistantBaseURL,
			Model:   cfg.AssistantModel,
			APIKey:  cfg.AssistantAPIKey,
			Timeout: cfg.AssistantTimeout,
		},
	})
	if err != nil {
		return nil, err
	}
	return []module.Module{wh, conv, proposals.New()}, nil
}
