package driver

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// LoopbackPort returns a TCP port free on this machine's loopback now, for a task that
// listens on it later (an endpoint instance's PORT, a job's MASTER_PORT). It is the local
// driver's TaskPort, whose nodes are processes of this machine.
//
// The port is drawn below the kernel's ephemeral range (Linux's ip_local_port_range, 32768
// on macOS and Windows too when it cannot be read), where the kernel never picks a port on
// its own: a port from the ephemeral range, free when handed out, may be taken as the
// source port of any outgoing connection before the task binds it. The port handed out is
// also kept from the next draws for a while, so two tasks that start together never get
// the same one. Only a process that binds that very port on purpose can still take it.
func LoopbackPort() (int, error) {
	return loopbackPorts.next()
}

// portRecency is how long a port handed out stays out of the draws: long enough for its
// task to start and bind it.
const portRecency = 2 * time.Minute

var loopbackPorts = &portPicker{low: taskPortLow, high: ephemeralLow(), recent: map[int]time.Time{}}

// taskPortLow is the first port tasks are given, as on SSH and Slurm nodes (their
// TaskPort scripts draw from 20000 up to the ephemeral range too).
const taskPortLow = 20000

// portPicker draws ports in [low, high) that are free and not handed out recently.
type portPicker struct {
	low, high int
	mu        sync.Mutex
	recent    map[int]time.Time
}

func (p *portPicker) next() (int, error) {
	if p.high-p.low < 1000 {
		// The ephemeral range starts too low to leave a range below it: the kernel picks.
		return kernelPort()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	for port, at := range p.recent {
		if now.Sub(at) > portRecency {
			delete(p.recent, port)
		}
	}
	var last error
	for range 50 {
		port := p.low + rand.IntN(p.high-p.low)
		if _, taken := p.recent[port]; taken {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			last = err
			continue
		}
		ln.Close()
		p.recent[port] = now
		return port, nil
	}
	return 0, Transient(fmt.Errorf("finding a free port on this machine between %d and %d: %v", p.low, p.high-1, last))
}

// kernelPort is a port the kernel picks from its ephemeral range.
func kernelPort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, Transient(fmt.Errorf("finding a free port on this machine: %w", err))
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range: Linux's, else 32768,
// which is Linux's default and below macOS's and Windows' (49152).
func ephemeralLow() int {
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if low, ok := parsePortRange(string(b)); ok {
			return low
		}
	}
	return 32768
}

// parsePortRange reads the first port of ip_local_port_range ("32768\t60999\n").
func parsePortRange(s string) (int, bool) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return 0, false
	}
	low, err := strconv.Atoi(f[0])
	if err != nil || low <= 0 || low > 65535 {
		return 0, false
	}
	return low, true
}
