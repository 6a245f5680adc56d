//go:build unix

package e2e

import (
	"strings"
	"testing"
)

// A misspelled key in an inline object, which terraform drops without a word, fails the
// plan of its own resource once, on the attribute's path, whatever the number of provider
// blocks; a plan that -target leaves the resource out of does not report it.
func TestE2E_MisspelledObjectKeyFollowsTheResourcesPlan(t *testing.T) {
	t.Parallel()
	u := newUser(t)
	u.writeConfig(`
terraform {
  required_providers {
    mlcompute = { source = "mlcompute/mlcompute" }
  }
}

provider "mlcompute" {}

provider "mlcompute" {
  alias = "second"
}

resource "mlcompute_workspace" "ws" {
  name = "keys"
}

resource "mlcompute_workspace" "other" {
  provider = mlcompute.second
  name     = "keys-other"
}

resource "mlcompute_compute_cluster" "good" {
  name           = "good"
  workspace_id   = mlcompute_workspace.ws.id
  vm_size        = "Standard_DS3_v2"
  scale_settings = { max_node_count = 1 }
}

resource "mlcompute_compute_cluster" "typo" {
  name           = "typo"
  workspace_id   = mlcompute_workspace.ws.id
  vm_size        = "Standard_DS3_v2"
  scale_settings = { max_node_count = 1, min_node_countt = 1 }
}
`)
	out, code := u.terraform("plan")
	if code == 0 || strings.Count(out, "Unknown Attribute In Object") != 1 {
		t.Fatalf("plan: exit %d; want it refused with one \"Unknown Attribute In Object\":\n%s", code, out)
	}
	for _, want := range []string{`main.tf:34: scale_settings in mlcompute_compute_cluster.typo has no attribute "min_node_countt"`,
		"with mlcompute_compute_cluster.typo", "scale_settings"} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), want) {
			t.Errorf("plan's error does not say %q:\n%s", want, out)
		}
	}
	if out, code := u.terraform("apply", "-auto-approve", "-target=mlcompute_compute_cluster.good"); code != 0 {
		t.Fatalf("apply -target of the correct cluster: exit %d; want the typo of another resource left out:\n%s", code, out)
	}
	if got := len(u.workspaces()); got != 1 {
		t.Fatalf("engine holds %d workspaces after apply -target; want the one the target needs", got)
	}
}
