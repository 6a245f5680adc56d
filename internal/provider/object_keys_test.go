package provider

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Keys terraform would drop from inline objects are reported with their file, line and
// path, in single nested, map nested and list nested attributes; correct keys, quoted
// keys, objects built from references and other providers' resources are left alone.
func TestUnknownObjectKeys(t *testing.T) {
	dir := t.TempDir()
	config := `
resource "mlcompute_compute_cluster" "cpu" {
  name         = "cpu"
  workspace_id = "/workspaces/lab"
  vm_size      = "Standard_DS3_v2"
  scale_settings = {
    max_node_countt = 3
    "min_node_count" = 0
  }
}

resource "mlcompute_compute_instance" "alice" {
  name         = "alice"
  workspace_id = "/workspaces/lab"
  vm_size      = "Standard_DS3_v2"
  schedules    = [{ action = "Stop", cron = "0 19 * * *", timezone = "UTC" }]
}

resource "mlcompute_online_endpoint" "churn" {
  name         = "churn"
  workspace_id = "/workspaces/lab"
  deployments = {
    blue = {
      instance_type    = "Standard_DS2_v2"
      command          = ["serve"]
      request_settings = { request_timeout = 2000 }
    }
    green = local.green
  }
}

resource "other_thing" "x" {
  settings = { anything = 1 }
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &mlcomputeProvider{}
	findings := unknownObjectKeys(context.Background(), dir, p.Resources(context.Background()))
	var got []string
	for _, f := range findings {
		got = append(got, f.detail)
	}
	want := []string{
		`main.tf:7: scale_settings in mlcompute_compute_cluster.cpu has no attribute "max_node_countt"`,
		`main.tf:16: schedules[0] in mlcompute_compute_instance.alice has no attribute "timezone"`,
		`main.tf:26: deployments["blue"].request_settings in mlcompute_online_endpoint.churn has no attribute "request_timeout"`,
	}
	if len(got) != len(want) {
		t.Fatalf("got %d diagnostics, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i, w := range want {
		if !strings.Contains(got[i], w) {
			t.Errorf("diagnostic %d:\n%s\nwant it to contain %s", i, got[i], w)
		}
	}
	if !strings.Contains(got[0], "scale_settings has max_node_count, min_node_count, scale_down_nodes_after_idle_duration") {
		t.Errorf("the diagnostic does not list the attribute's keys: %s", got[0])
	}
	// Each finding carries the block's literal name, which the planned name matches, and
	// the attribute's path, where the plan reports it.
	wantAt := []struct{ name, at string }{
		{"cpu", "scale_settings"},
		{"alice", "schedules[0]"},
		{"churn", `deployments["blue"].request_settings`},
	}
	for i, w := range wantAt {
		if f := findings[i]; f.name != w.name || f.at.String() != w.at {
			t.Errorf("finding %d is for name %q at %s; want %q at %s", i, f.name, f.at, w.name, w.at)
		}
	}
	if findings := unknownObjectKeys(context.Background(), t.TempDir(), p.Resources(context.Background())); len(findings) != 0 {
		t.Errorf("a directory without .tf files: %v", findings)
	}
}
