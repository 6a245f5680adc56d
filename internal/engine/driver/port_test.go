package driver

import (
	"net"
	"strconv"
	"testing"
	"time"
)

func TestParsePortRange(t *testing.T) {
	for in, want := range map[string]int{"32768\t60999\n": 32768, "1024 65535": 1024, "": 0, "x 6": 0, "0 10": 0, "70000 70001": 0, "5": 0} {
		got, ok := parsePortRange(in)
		if got != want || ok != (want != 0) {
			t.Errorf("parsePortRange(%q) = %d, %v; want %d", in, got, ok, want)
		}
	}
}

// Ports come from below the ephemeral range, free, and never twice while recent; a
// range too small to hold them falls back to the kernel's pick.
func TestPortPickerDrawsFreeDistinctPortsBelowTheEphemeralRange(t *testing.T) {
	port, err := LoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	if low := ephemeralLow(); low-taskPortLow >= 1000 && (port < taskPortLow || port >= low) {
		t.Fatalf("LoopbackPort() = %d; want one in [%d, %d), below the ephemeral range", port, taskPortLow, low)
	}
	p := &portPicker{low: 20000, high: 21000, recent: map[int]time.Time{}}
	seen := map[int]bool{}
	for range 200 {
		port, err := p.next()
		if err != nil {
			t.Fatal(err)
		}
		if port < 20000 || port >= 21000 || seen[port] {
			t.Fatalf("draw %d: port %d (seen before: %v); want a new one in [20000, 21000)", len(seen), port, seen[port])
		}
		seen[port] = true
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("port %d handed out is not free: %v", port, err)
		}
		ln.Close()
	}
	tiny := &portPicker{low: 20000, high: 20010, recent: map[int]time.Time{}}
	if port, err := tiny.next(); err != nil || port < ephemeralLow() {
		t.Fatalf("a range too small: %d, %v; want the kernel's pick, from its ephemeral range", port, err)
	}
}
