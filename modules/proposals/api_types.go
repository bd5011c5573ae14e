package proposals

// The JSON the module's HTTP routes take and answer, exported for clients in the same binary (the web
// console). Aliases keep the handlers and the served document exactly as declared.
type (
	ProposalResponse = proposalResponse
	ActionResponse   = actionResponse
	RejectRequest    = rejectRequest
)

// The operation ids of the module's routes.
const (
	OpListProposals  = "listProposals"
	OpGetProposal    = "getProposal"
	OpAcceptProposal = "acceptProposal"
	OpRejectProposal = "rejectProposal"
)
