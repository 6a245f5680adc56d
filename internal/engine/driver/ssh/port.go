package ssh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
)

// The range portScript picks from: below Linux's ephemeral range (32768 to 60999), so a
// port it gives is not one the kernel hands an outgoing connection meanwhile.
const (
	portLow  = 20000
	portHigh = 32767
)

// portScript prints a TCP port free on the machine it runs on, in POSIX sh with awk and
// od, so that a machine without python3 answers too: it reads every TCP socket's local
// port from /proc/net/tcp and tcp6 (listening, connected or bound alike) and prints the
// first of 32 random ports of [portLow, portHigh] that none holds. Random (from
// /dev/urandom), not the lowest free one, so that two engines' or two allocations' asks on
// one machine at one moment do not get the same answer. A machine without /proc/net/tcp
// (macOS) asks python3's kernel-picked port instead; without both it exits 3. It exits 4
// when all 32 were taken.
var portScript = `if [ ! -r /proc/net/tcp ]; then
  command -v python3 >/dev/null 2>&1 || { echo "no /proc/net/tcp and no python3 to find a free port with" >&2; exit 3; }
  exec python3 -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'
fi
r=$(od -An -N64 -tu2 /dev/urandom) || exit 3
cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk -v r="$r" -v lo=` + strconv.Itoa(portLow) + ` -v hi=` + strconv.Itoa(portHigh) + ` '
function hex(s,   i, n) { n = 0; for (i = 1; i <= length(s); i++) n = n * 16 + index("0123456789ABCDEF", toupper(substr(s, i, 1))) - 1; return n }
$2 ~ /:/ { split($2, a, ":"); used[hex(a[2])] = 1 }
END { n = split(r, c, " "); for (i = 1; i <= n; i++) { p = lo + c[i] % (hi - lo + 1); if (!(p in used)) { print p; exit 0 } } exit 4 }'`

// PortCommand is the command line that prints a TCP port free on the machine it runs on
// (see portScript); ParsePort reads its answer. The ssh driver runs it over the node's
// connection, the Slurm driver as a step of the node's allocation.
var PortCommand = []string{"sh", "-c", portScript, "mlcompute-port"}

// ParsePort reads what PortCommand printed and its exit status: a missing way to look
// (no /proc/net/tcp and no python3) is driver.ErrPermanent, a machine whose ports were all
// taken driver.ErrTransient.
func ParsePort(stdout, stderr []byte, code int) (int, error) {
	msg := strings.TrimSpace(string(stderr))
	switch code {
	case 0:
	case 3:
		return 0, driver.Permanent(fmt.Errorf("finding a free port: %s", msg))
	case 4:
		return 0, driver.Transient(fmt.Errorf("finding a free port: 32 random ports of %d-%d were all taken", portLow, portHigh))
	default:
		return 0, fmt.Errorf("finding a free port: exit status %d: %s", code, msg)
	}
	port, err := strconv.Atoi(string(bytes.TrimSpace(stdout)))
	if err != nil || port <= 0 || port > 65535 {
		return 0, errors.New("finding a free port: the machine answered " + strconv.Quote(string(stdout)))
	}
	return port, nil
}

// shellWords quotes a command line for sh.
func shellWords(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}

// TaskPort asks the machine for a TCP port free on it now (see PortCommand), over the
// node's connection.
func (d *Driver) TaskPort(ctx context.Context, nodeKey string) (int, error) {
	var port int
	err := d.do(ctx, nodeKey, func(c *Client) error {
		var out bytes.Buffer
		stderr, code, err := c.RunShell(ctx, shellWords(PortCommand), strings.NewReader(""), &out)
		if err != nil {
			return err
		}
		port, err = ParsePort(out.Bytes(), stderr, code)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("node %s: %w", nodeKey, err)
	}
	return port, nil
}
