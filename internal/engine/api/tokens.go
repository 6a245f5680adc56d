package api

import "time"

// Roles of API tokens (DESIGN 11). Each role holds the permissions of the ones before it.
const (
	// RoleReader reads.
	RoleReader = "reader"
	// RoleContributor creates, changes and deletes in its workspaces, submits jobs and
	// invokes endpoints.
	RoleContributor = "contributor"
	// RoleOperator does everything, tokens included.
	RoleOperator = "operator"
)

// Roles lists the roles, from the least to the most allowed.
func Roles() []string { return []string{RoleReader, RoleContributor, RoleOperator} }

// TokenFileName is the name the token of the engine's token file (--token-file, api.token)
// goes by: an operator token on every workspace that lives in the file, not in the store.
const TokenFileName = "token-file"

// TokenSpec is the body of POST /v1/tokens.
type TokenSpec struct {
	Name string `json:"name"`
	Role string `json:"role"`
	// Workspaces scope the token; none means every workspace.
	Workspaces []string `json:"workspaces,omitempty"`
	// ExpiresInSeconds, when above 0, makes the token stop working that long after it is made.
	ExpiresInSeconds int64 `json:"expires_in_seconds,omitempty"`
}

// Token describes an API token. Its secret is never stored nor shown again after creation.
type Token struct {
	Name       string     `json:"name"`
	Role       string     `json:"role"`
	Workspaces []string   `json:"workspaces"`
	CreatedAt  *time.Time `json:"created_at,omitempty"`
	CreatedBy  string     `json:"created_by,omitempty"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
}

// TokenCreated is the answer to POST /v1/tokens: the token and, this once, its secret.
type TokenCreated struct {
	Token
	Secret string `json:"secret"`
}

// TokenList is the body of GET /v1/tokens.
type TokenList struct {
	Tokens []Token `json:"tokens"`
}

// AuditEntry is one line of the audit log: a change, a job submit or a denied token use.
type AuditEntry struct {
	Time time.Time `json:"time"`
	// Token is the name of the token that made the request ("local" on an engine without
	// tokens, a Unix socket reached through its file mode).
	Token string `json:"token"`
	// Action is the API operation: its method and route ("POST /v1/workspaces/{workspace}/jobs").
	Action string `json:"action"`
	// Target is what it acted on: the request's path, or the object it made.
	Target string `json:"target"`
	// Result is "allowed" (the operation succeeded), "failed" (allowed, but the engine
	// refused or failed it) or "denied" (the token may not do it).
	Result string `json:"result"`
	// Status is the HTTP status of the answer.
	Status int `json:"status"`
	// Reason says why an operation failed or was denied.
	Reason string `json:"reason,omitempty"`
}

// AuditList is the body of GET /v1/audit.
type AuditList struct {
	Entries []AuditEntry `json:"entries"`
}
