package driver

import (
	"fmt"
	"net"
)

// LoopbackPort returns a TCP port free on this machine's loopback now: the kernel picks it
// from its ephemeral range for a listener that is closed at once. It is the local driver's
// TaskPort, whose nodes are processes of this machine.
func LoopbackPort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, Transient(fmt.Errorf("finding a free port on this machine: %w", err))
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
