package conversations

// The JSON the module's HTTP routes take and answer, exported for clients in the same binary (the web
// console). Aliases keep the handlers and the served document exactly as declared.
type (
	ConversationResponse = conversationResponse
	MessageResponse      = messageResponse
	TitleRequest         = titleRequest
	MessageRequest       = messageRequest
)

// The operation ids of the module's routes.
const (
	OpCreateConversation = "createConversation"
	OpListConversations  = "listConversations"
	OpGetConversation    = "getConversation"
	OpPostMessage        = "postMessage"
	OpListMessages       = "listMessages"
)
