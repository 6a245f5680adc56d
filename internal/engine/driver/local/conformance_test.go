//go:build unix

package local

import (
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/drivertest"
)

// TestConformance runs the driver suite on real node agents (this test binary, see
// TestMain). A node dies from outside when its agent is SIGKILLed.
func TestConformance(t *testing.T) {
	drivertest.Run(t, drivertest.Harness{
		New: func(t *testing.T) driver.Driver { return newDriver(t, "") },
		KillNode: func(t *testing.T, d driver.Driver, key string) {
			if err := unix.Kill(agentPid(t, d.(*Driver), key), syscall.SIGKILL); err != nil {
				t.Fatalf("killing the agent of %s: %v", key, err)
			}
		},
		WaitLimit: waitLimit,
	})
}
