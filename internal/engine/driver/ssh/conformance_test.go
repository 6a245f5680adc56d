//go:build unix

package ssh

import (
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/drivertest"
)

// TestConformance runs the driver suite against one real sshd (see sshtest): every node
// the suite records stands for that machine, as an attached compute's node does. An
// attached machine offers no sessions, lists no nodes and never reports NodeGone.
func TestConformance(t *testing.T) {
	s := startSSHD(t)
	ts := &targets{m: map[string]Target{}}
	drivertest.Run(t, drivertest.Harness{
		New: func(t *testing.T) driver.Driver {
			d := NewDriver(DriverConfig{Lookup: ts.lookup, KeepAlive: 500 * time.Millisecond})
			t.Cleanup(func() { d.Close() })
			return d
		},
		Record: func(_ *testing.T, spec driver.NodeSpec) {
			ts.mu.Lock()
			defer ts.mu.Unlock()
			ts.m[spec.Key] = s.target()
		},
		NoNodeGone: true,
		NoExec:     true,
		NoList:     true,
		WaitLimit:  waitLimit,
	})
}
