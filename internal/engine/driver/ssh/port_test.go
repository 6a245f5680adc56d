package ssh

import (
	"bytes"
	"net"
	"os/exec"
	"strconv"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
)

// TestPortCommand runs the port finder's sh on this machine: its answer is in the range
// and free (a listener binds it), and a port held by a listener is never the answer.
func TestPortCommand(t *testing.T) {
	seen := map[int]bool{}
	for range 20 {
		port := runPortCommand(t)
		if port < portLow || port > portHigh {
			t.Fatalf("port %d, want one of %d-%d", port, portLow, portHigh)
		}
		ln, err := net.Listen("tcp", ":"+strconv.Itoa(port))
		if err != nil {
			t.Fatalf("the port the machine gave is not free: %v", err)
		}
		defer ln.Close()
		seen[port] = true
	}
	if len(seen) != 20 {
		t.Fatalf("20 asks while each answer was held gave %d distinct ports, want 20", len(seen))
	}
}

func runPortCommand(t *testing.T) int {
	t.Helper()
	cmd := exec.Command(PortCommand[0], PortCommand[1:]...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	code := 0
	if err := cmd.Run(); err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatal(err)
		}
		code = ee.ExitCode()
	}
	port, err := ParsePort(out.Bytes(), errOut.Bytes(), code)
	if err != nil {
		t.Fatal(err)
	}
	return port
}

func TestParsePort(t *testing.T) {
	if _, err := ParsePort(nil, []byte("no /proc/net/tcp and no python3"), 3); !driver.IsPermanent(err) {
		t.Errorf("exit 3: %v, want permanent", err)
	}
	if _, err := ParsePort(nil, nil, 4); !driver.IsTransient(err) {
		t.Errorf("exit 4: %v, want transient", err)
	}
	for _, bad := range []string{"", "x", "0", "70000"} {
		if _, err := ParsePort([]byte(bad), nil, 0); err == nil {
			t.Errorf("answer %q: no error", bad)
		}
	}
	if p, err := ParsePort([]byte("20001\n"), nil, 0); p != 20001 || err != nil {
		t.Errorf("answer 20001: %d, %v", p, err)
	}
}
