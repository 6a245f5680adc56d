//go:build unix

package fake

import (
	"context"
	"io"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/drivertest"
)

// TestConformance runs the driver suite on the fake both ways: nodes ready at once (as
// New makes them) and nodes that wait for MakeReady (as a queued allocation does).
func TestConformance(t *testing.T) {
	for _, pending := range []bool{false, true} {
		name := map[bool]string{false: "Ready", true: "Pending"}[pending]
		t.Run(name, func(t *testing.T) {
			drivertest.Run(t, drivertest.Harness{
				New: func(t *testing.T) driver.Driver {
					d := NewWithOptions(nil, Options{CreatePending: pending, Start: actOut(drivertest.HeldPorts{}), Exec: actOutSession, Dir: t.TempDir()})
					t.Cleanup(func() { d.Close() })
					return d
				},
				CreatePending: pending,
				MakeReady:     func(_ *testing.T, d driver.Driver, key string) { d.(*Driver).MakeReady(key) },
				KillNode:      func(_ *testing.T, d driver.Driver, key string) { d.(*Driver).KillNode(key) },
			})
		})
	}
}

// actOut returns a task's Start: it does what a suite program says, its ports held in
// held; other commands run until finished or killed.
func actOut(held drivertest.HeldPorts) func(string, driver.TaskSpec) Outcome {
	return func(node string, spec driver.TaskSpec) Outcome {
		p, ok := drivertest.Decode(spec.Command)
		if !ok {
			return Outcome{}
		}
		out, code := p.Output, p.ExitCode
		if c := p.ActOutFiles(spec.Env[driver.WorkDirEnv]); c != 0 {
			code = c
		} else if listened, c := p.ActOutListen(held, node); c != 0 {
			code = c
		} else {
			out += listened
		}
		return Outcome{Output: []byte(out), Exited: !p.Block || code != p.ExitCode, ExitCode: code}
	}
}

// actOutSession runs a suite program as a session: its output, then stdin copied when
// it asks for it, then its exit code.
func actOutSession(_ context.Context, _ string, spec driver.ExecSpec) (int, error) {
	p, ok := drivertest.Decode(spec.Command)
	if !ok {
		_, err := io.Copy(spec.Output, spec.Stdin)
		return 0, err
	}
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
