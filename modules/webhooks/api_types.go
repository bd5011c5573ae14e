package webhooks

// The JSON the module's HTTP routes take and answer, exported for clients in the same binary (the web
// console): they decode the module's own types, so a renamed field breaks their build, not their pages.
// Aliases keep the handlers and the served document exactly as declared.
type (
	SubscriptionResponse      = subscriptionResponse
	CreateSubscriptionRequest = createSubscriptionRequest
	UpdateSubscriptionRequest = updateSubscriptionRequest
	DeliveryResponse          = deliveryResponse
	AttemptResponse           = attemptResponse
	EventTypeResponse         = eventTypeResponse
	OperationResponse         = operationResponse
	PublishEventResponse      = publishEventResponse
)

// The operation ids of the module's routes, for clients that find a route by its id rather than its path.
const (
	OpCreateSubscription  = "createWebhookSubscription"
	OpListSubscriptions   = "listWebhookSubscriptions"
	OpGetSubscription     = "getWebhookSubscription"
	OpUpdateSubscription  = "updateWebhookSubscription"
	OpDeleteSubscription  = "deleteWebhookSubscription"
	OpRotateSecret        = "rotateWebhookSecret" //nolint:gosec // an operation id, no credential
	OpPauseSubscription   = "pauseWebhookSubscription"
	OpResumeSubscription  = "resumeWebhookSubscription"
	OpSubscriptionStats   = "getWebhookSubscriptionStats"
	OpSendTest            = "sendWebhookTest"
	OpRecoverSubscription = "recoverWebhookSubscription"
	OpListEventTypes      = "listWebhookEventTypes"
	OpListDeliveries      = "listWebhookDeliveries"
	OpGetDelivery         = "getWebhookDelivery"
	OpRedeliver           = "redeliverWebhook"
	OpOverview            = "getWebhookOverview"
)
