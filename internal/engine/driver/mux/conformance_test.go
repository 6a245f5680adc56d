//go:build unix

package mux

import (
	"context"
	"io"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/drivertest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/fake"
)

// TestConformance runs the driver suite through a router: the suite's nodes (keys
// starting "dt") go to a fake with pending nodes, so every call and every event kind,
// NodeReady included, crosses the router. Its default driver gets only List and Close.
func TestConformance(t *testing.T) {
	routed := map[driver.Driver]*fake.Driver{}
	drivertest.Run(t, drivertest.Harness{
		New: func(t *testing.T) driver.Driver {
			def := fake.New(nil)
			target := fake.NewWithOptions(nil, fake.Options{CreatePending: true, Start: actOut(drivertest.HeldPorts{}), Exec: actOutSession, Dir: t.TempDir()})
			ctx, cancel := context.WithCancel(context.Background())
			d := New(ctx, def, Route{Prefix: "dt", Driver: target})
			t.Cleanup(func() {
				cancel()
				d.Close()
				for _, c := range def.Calls() { // List and Close go to every driver
					if c.Method != fake.MethodList && c.Method != fake.MethodClose {
						t.Errorf("the default driver got a call for a routed node: %v", c)
					}
				}
			})
			routed[d] = target
			return d
		},
		CreatePending: true,
		MakeReady:     func(_ *testing.T, d driver.Driver, key string) { routed[d].MakeReady(key) },
		KillNode:      func(_ *testing.T, d driver.Driver, key string) { routed[d].KillNode(key) },
	})
}

// actOut returns a task's Start: it does what a suite program says, its ports held in
// held; other commands run until finished or killed.
func actOut(held drivertest.HeldPorts) func(string, driver.TaskSpec) fake.Outcome {
	return func(node string, spec driver.TaskSpec) fake.Outcome {
		p, ok := drivertest.Decode(spec.Command)
		if !ok {
			return fake.Outcome{}
		}
		out, code := p.Output, p.ExitCode
		if c := p.ActOutFiles(spec.Env[driver.WorkDirEnv]); c != 0 {
			code = c
		} else if listened, c := p.ActOutListen(held, node); c != 0 {
			code = c
		} else {
			out += listened
		}
		return fake.Outcome{Output: []byte(out), Exited: !p.Block || code != p.ExitCode, ExitCode: code}
	}
}

func actOutSession(_ context.Context, _ string, spec driver.ExecSpec) (int, error) {
	p, _ := drivertest.Decode(spec.Command)
	if _, err := io.WriteString(spec.Output, p.Output); err != nil {
		return 0, err
	}
	if p.Stdin {
		if _, err := io.Copy(spec.Output, spec.Stdin); err != nil {
			return 0, err
		}
	}
	return p.ExitCode, nil
}
