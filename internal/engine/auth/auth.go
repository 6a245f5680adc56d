// Package auth decides who may do what through the engine's API (DESIGN 11): API tokens
// with a role and workspaces, stored hashed in the engine's store; the permission each API
// operation needs; and the audit log of changes, job submits and denied token uses.
package auth

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// Verb is what an API operation does, and so the permission it needs.
type Verb string

const (
	// Any is allowed to every valid token (engine status, the VM sizes).
	Any Verb = ""
	// Read reads a workspace's objects.
	Read Verb = "read"
	// Write creates, changes or deletes a workspace's objects, submits jobs, and reads
	// what invokes an endpoint (its keys and tokens).
	Write Verb = "write"
	// Admin manages tokens and the engine itself (shutdown, backup, the audit log).
	Admin Verb = "admin"
)

// AllWorkspaces, as a Need's workspace, asks for the permission on every workspace: the
// operations that see or change all of them at once.
const AllWorkspaces = "*"

// Need is the permission one call needs: a verb, on a workspace ("" for Any and Admin,
// AllWorkspaces for the calls that span workspaces).
type Need struct {
	Verb      Verb
	Workspace string
}

func (n Need) String() string {
	switch {
	case n.Verb == Admin:
		return "admin (the operator role)"
	case n.Workspace == AllWorkspaces:
		return fmt.Sprintf("%s on every workspace", n.Verb)
	case n.Workspace != "":
		return fmt.Sprintf("%s on workspace %q", n.Verb, n.Workspace)
	}
	return string(n.Verb)
}

// Identity is who makes a request: a token's name, role and workspaces (none: all).
type Identity struct {
	Name       string
	Role       string
	Workspaces []string
}

// Local is the identity of a caller of an engine without tokens: one reached through its
// Unix socket, whose file mode is the access control.
var Local = Identity{Name: "local", Role: api.RoleOperator}

// verbs lists what each role may do.
var verbs = map[string][]Verb{
	api.RoleReader:      {Any, Read},
	api.RoleContributor: {Any, Read, Write},
	api.RoleOperator:    {Any, Read, Write, Admin},
}

// Allows reports whether the identity holds the permission.
func (id Identity) Allows(n Need) bool {
	if !slices.Contains(verbs[id.Role], n.Verb) {
		return false
	}
	switch n.Workspace {
	case "":
		return true
	case AllWorkspaces:
		return len(id.Workspaces) == 0
	}
	return id.InWorkspace(n.Workspace)
}

// InWorkspace reports whether the identity's scope holds the workspace.
func (id Identity) InWorkspace(ws string) bool {
	return len(id.Workspaces) == 0 || slices.Contains(id.Workspaces, ws)
}

// Denied is the 403 for a call outside the identity's role or workspaces, naming the
// permission it lacks.
func (id Identity) Denied(n Need) *api.Error {
	scope := "every workspace"
	if len(id.Workspaces) > 0 {
		scope = "workspaces " + strings.Join(id.Workspaces, ", ")
	}
	return api.Errorf(api.CodeForbidden, "", "token %q (role %s, %s) lacks the permission %s", id.Name, id.Role, scope, n)
}

// ValidRole checks a role against the list.
func ValidRole(role string) error {
	if !slices.Contains(api.Roles(), role) {
		return api.Errorf(api.CodeInvalid, "role", "role must be one of %s, got %q", strings.Join(api.Roles(), ", "), role)
	}
	return nil
}
