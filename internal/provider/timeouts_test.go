package provider

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
)

func TestAddTimeoutError(t *testing.T) {
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	var diags diag.Diagnostics
	if !addTimeoutError(expired, &diags, "Compute Cluster Delete Timed Out", "delete", `delete compute cluster "cpu"`, 30*time.Minute, errors.New("context deadline exceeded")) {
		t.Fatal("an expired deadline is a timeout")
	}
	if len(diags) != 1 || diags[0].Summary() != "Compute Cluster Delete Timed Out" {
		t.Fatalf("diags %v", diags)
	}
	for _, want := range []string{`to delete compute cluster "cpu" after 30m, the delete timeout`, "carries the operation on",
		`timeouts = { delete = "1h" }`, "Original error: context deadline exceeded"} {
		if !strings.Contains(diags[0].Detail(), want) {
			t.Errorf("detail %q lacks %q", diags[0].Detail(), want)
		}
	}

	canceled, cancel2 := context.WithCancel(context.Background())
	cancel2()
	diags = nil
	for _, ctx := range []context.Context{context.Background(), canceled} {
		if addTimeoutError(ctx, &diags, "S", "create", "a", time.Minute, errors.New("boom")) || len(diags) != 0 {
			t.Errorf("a context without a passed deadline is not a timeout: %v", diags)
		}
	}
}

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		20 * time.Minute:                  "20m",
		time.Hour:                         "1h",
		90 * time.Minute:                  "1h30m",
		45 * time.Second:                  "45s",
		time.Hour + 30*time.Second:        "1h0m30s",
		2*time.Hour + 5*time.Minute + 1e9: "2h5m1s",
	} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%s) = %q, want %q", d, got, want)
		}
	}
}

func TestMayHaveCreated(t *testing.T) {
	c, err := client.New("unix:///nonexistent/mlcompute-test/engine.sock", "", client.WithAttempts(1))
	if err != nil {
		t.Fatal(err)
	}
	_, unreachable := c.GetWorkspace(context.Background(), "lab")
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	for _, tt := range []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"engine refused", context.Background(), api.Errorf(api.CodeQuotaExceeded, "scale_settings.max_node_count", "quota"), false},
		{"connection lost", context.Background(), unreachable, true},
		{"deadline passed", expired, errors.New("context deadline exceeded"), true},
	} {
		if got := mayHaveCreated(tt.ctx, tt.err); got != tt.want {
			t.Errorf("%s: mayHaveCreated = %v, want %v (err %v)", tt.name, got, tt.want, tt.err)
		}
	}
}
