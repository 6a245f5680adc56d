package api

import "strings"

// Collection names as they appear in IDs.
const (
	CollectionComputes        = "computes"
	CollectionOnlineEndpoints = "onlineEndpoints"
)

// ID is a parsed resource ID: /workspaces/{ws} or /workspaces/{ws}/{collection}/{name}.
type ID struct {
	Workspace  string
	Collection string // empty for a workspace
	Name       string // empty for a workspace
}

func (id ID) String() string {
	if id.Collection == "" {
		return "/workspaces/" + id.Workspace
	}
	return "/workspaces/" + id.Workspace + "/" + id.Collection + "/" + id.Name
}

// WorkspaceID is the ID of a workspace.
func WorkspaceID(name string) string { return ID{Workspace: name}.String() }

// ParseID parses an ID and checks that it names an object of the wanted collection
// ("" for a workspace).
func ParseID(s, collection string) (ID, error) {
	want := "/workspaces/{workspace}"
	if collection != "" {
		want += "/" + collection + "/{name}"
	}
	parts := strings.Split(s, "/")
	bad := Errorf(CodeInvalid, "id", "ID %q is not of the form %s", s, want)
	if len(parts) < 3 || parts[0] != "" || parts[1] != "workspaces" || parts[2] == "" {
		return ID{}, bad
	}
	id := ID{Workspace: parts[2]}
	switch {
	case collection == "" && len(parts) == 3:
		return id, nil
	case collection != "" && len(parts) == 5 && parts[3] == collection && parts[4] != "":
		id.Collection, id.Name = collection, parts[4]
		return id, nil
	}
	return ID{}, bad
}
