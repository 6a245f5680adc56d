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
					d := NewWithOptions(nil, Options{CreatePending: pending, Start: actOut, Exec: actOutSession, Dir: t.TempDir()})
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

// actOut does what a suite program says; other commands run until finished or killed.
func actOut(_ string, spec driver.TaskSpec) Outcome {
	p, ok := drivertest.Decode(spec.Command)
	if !ok {
		return Outcome{}
	}
	code := p.ExitCode
	if c := p.ActOutFiles(spec.Env[driver.WorkDirEnv]); c != 0 {
		code = c
	}
	return Outcome{Output: []byte(p.Output), Exited: !p.Block, ExitCode: code}
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
