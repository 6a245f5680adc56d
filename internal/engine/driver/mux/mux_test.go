package mux

import (
	"context"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/fake"
)

func TestRoutesByKeyPrefixAndMergesEvents(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC))
	local, vms := fake.New(clk), fake.New(clk)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := New(ctx, local, Route{Prefix: "vm-", Driver: vms})

	for _, key := range []string{"node-1", "vm-1"} {
		if _, err := d.Create(ctx, driver.NodeSpec{Key: key, Owner: "ws/c"}); err != nil {
			t.Fatal(err)
		}
		if err := d.StartTask(ctx, key, driver.TaskSpec{Key: "t", Command: []string{"true"}}); err != nil {
			t.Fatal(err)
		}
	}
	if got := local.Nodes(); len(got) != 1 || got[0] != "node-1" {
		t.Fatalf("default driver has %v, want [node-1]", got)
	}
	if got := vms.Nodes(); len(got) != 1 || got[0] != "vm-1" {
		t.Fatalf("routed driver has %v, want [vm-1]", got)
	}
	all, err := d.List(ctx, "")
	if err != nil || len(all) != 2 {
		t.Fatalf("List = %v, %v; want both nodes", all, err)
	}
	if d.Name() != fake.Name {
		t.Fatalf("Name = %q, want the default driver's", d.Name())
	}

	vms.FinishTask("vm-1", "t", 3)
	local.FinishTask("node-1", "t", 0)
	got := map[string]int{}
	for len(got) < 2 {
		select {
		case ev := <-d.Events():
			got[ev.NodeKey] = ev.ExitCode
		case <-time.After(10 * time.Second):
			t.Fatalf("events so far %v, want exits of both nodes", got)
		}
	}
	if got["vm-1"] != 3 || got["node-1"] != 0 {
		t.Fatalf("exits %v", got)
	}
	if err := d.Terminate(ctx, "vm-1"); err != nil {
		t.Fatal(err)
	}
	if len(vms.Nodes()) != 0 || len(local.Nodes()) != 1 {
		t.Fatalf("terminate went to the wrong driver: local %v, vms %v", local.Nodes(), vms.Nodes())
	}
}
