package provider

import (
	"strings"
	"testing"
)

func TestCheckWorkspaceID(t *testing.T) {
	for id, want := range map[string]string{
		"/workspaces/team-a":            "",
		"team-a":                        "is not of the form /workspaces/{workspace}",
		"/workspaces/":                  "is not of the form",
		"/workspaces/team-a/computes/c": "is not of the form /workspaces/{workspace}",
		"/workspaces/a b":               `invalid workspace name "a b"`,
		"/workspaces/ab":                "3 to 33 characters",
		"/workspaces/team-a/":           "is not of the form",
	} {
		err := checkWorkspaceID(id)
		switch {
		case want == "" && err != nil:
			t.Errorf("checkWorkspaceID(%q) = %v, want nil", id, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("checkWorkspaceID(%q) = %v, want an error containing %q", id, err, want)
		}
	}
}

func TestWorkspaceIDAttribute(t *testing.T) {
	a := workspaceIDAttribute("cluster")
	if !a.Required || len(a.PlanModifiers) != 1 || len(a.Validators) != 1 {
		t.Fatalf("workspace_id must be required, replace on change and be validated: %+v", a)
	}
	if !strings.Contains(a.MarkdownDescription, "replaces the cluster") {
		t.Errorf("description %q", a.MarkdownDescription)
	}
}
