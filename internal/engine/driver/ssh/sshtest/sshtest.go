//go:build unix

// Package sshtest starts real SSH test hosts: Debian's sshd, each in a network namespace
// of its own reached through a veth pair from a private range, with a throwaway user. When
// namespaces are not permitted (no root, no iproute2, a container without CAP_NET_ADMIN)
// a host falls back to an sshd on a loopback address of its own (127.0.0.x). Everything a
// host made (namespace, link, user, home, sshd) is removed when the test ends, also when it
// fails, and by the next Start when the test process was killed. It needs root and
// openssh-server, and fails rather than skips without them.
//
// Tests across packages use it: the ssh driver's, the engine's, the provider's acceptance
// tests. It does not import the ssh package, so that package's own tests can use it.
package sshtest

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"
)

// SSHDPath is where Debian's openssh-server installs sshd.
const SSHDPath = "/usr/sbin/sshd"

// NoNetnsEnv, set to 1, makes every host use the loopback fallback (to test it, or where
// namespaces misbehave).
const NoNetnsEnv = "MLCOMPUTE_TEST_NO_NETNS"

// Host is a running sshd with a user that may log in with Password or KeyPEM.
type Host struct {
	// Address and Port are where sshd listens: the namespace's veth address and port 22,
	// or a loopback address and a free port in the fallback.
	Address string
	Port    int
	// Namespace is the network namespace sshd runs in; empty in the loopback fallback.
	Namespace string
	// HostLink is the veth end on this machine's side (namespaces only).
	HostLink string
	nsLink   string

	User      string
	UID, GID  int
	Home      string
	Password  string
	KeyPEM    string // accepted for User
	DarwinKey string // accepted, but its forced command answers every command with "Darwin"
	// Fingerprint is the host key's SHA256 fingerprint in OpenSSH form.
	Fingerprint string

	sshd *exec.Cmd
	rec  hostRecord
}

// Start starts a host that is torn down when t ends.
func Start(t testing.TB) *Host {
	t.Helper()
	if _, err := os.Stat(SSHDPath); err != nil {
		t.Fatalf("%s not found: these tests need a real sshd; install it with `apt-get install -y --no-install-recommends openssh-server`", SSHDPath)
	}
	if os.Geteuid() != 0 {
		t.Fatalf("these tests must run as root: they create a test user for sshd")
	}
	for _, tool := range []string{"ssh-keygen", "useradd", "userdel", "chpasswd"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: %v", tool, err)
		}
	}
	sweepLeftovers(t)

	h := &Host{}
	h.User = "mlct" + randHex(4)
	self, err := startTime(os.Getpid())
	must(t, err)
	h.rec = hostRecord{Owner: os.Getpid(), OwnerStart: self, User: h.User}
	// Registered first, so it runs last: the record goes once all it names is gone.
	t.Cleanup(func() { _ = os.Remove(h.rec.path()) })
	// The user must traverse the directory to its home and authorized_keys, so it is not
	// a 0700 t.TempDir.
	dir, err := os.MkdirTemp("", "mlc-sshd-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	h.rec.Dir = dir
	h.rec.save(t)
	must(t, os.Chmod(dir, 0o755))
	must(t, os.MkdirAll("/run/sshd", 0o755)) // privilege separation directory

	h.Home = filepath.Join(dir, "home")
	h.Password = "pw-" + randHex(4)
	run(t, "useradd", "-m", "-d", h.Home, "-s", "/bin/sh", h.User)
	t.Cleanup(func() {
		// Tasks the test left running would keep the user busy.
		_ = exec.Command("pkill", "-KILL", "-u", h.User).Run()
		if out, err := exec.Command("userdel", "-f", "-r", h.User).CombinedOutput(); err != nil {
			t.Logf("userdel %s: %v: %s", h.User, err, out)
		}
	})
	cmd := exec.Command("chpasswd")
	cmd.Stdin = strings.NewReader(h.User + ":" + h.Password + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chpasswd: %v: %s", err, out)
	}
	u, err := user.Lookup(h.User)
	must(t, err)
	h.UID, _ = strconv.Atoi(u.Uid)
	h.GID, _ = strconv.Atoi(u.Gid)

	hostKey := filepath.Join(dir, "host_ed25519")
	run(t, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", hostKey)
	pubRaw, err := os.ReadFile(hostKey + ".pub")
	must(t, err)
	hostPub, _, _, _, err := gossh.ParseAuthorizedKey(pubRaw)
	must(t, err)
	h.Fingerprint = gossh.FingerprintSHA256(hostPub)

	var authorized strings.Builder
	h.KeyPEM = NewClientKey(t, "", &authorized)
	h.DarwinKey = NewClientKey(t, `command="echo Darwin" `, &authorized)
	authFile := filepath.Join(dir, "authorized_keys")
	must(t, os.WriteFile(authFile, []byte(authorized.String()), 0o644))

	var prefix []string
	if err := h.makeNamespace(t); err != nil {
		t.Logf("network namespaces unavailable (%v); using an sshd on a loopback address", err)
		h.Address, h.Port = loopbackAddress(t)
	} else {
		prefix = []string{"ip", "netns", "exec", h.Namespace}
	}

	cfg := filepath.Join(dir, "sshd_config")
	must(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`ListenAddress %s
Port %d
HostKey %s
PidFile %s
AuthorizedKeysFile %s
PasswordAuthentication yes
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin no
AllowUsers %s
UsePAM no
StrictModes no
LogLevel VERBOSE
`, h.Address, h.Port, hostKey, filepath.Join(dir, "sshd.pid"), authFile, h.User)), 0o644))

	logFile, err := os.Create(filepath.Join(dir, "sshd.log"))
	must(t, err)
	args := append(prefix, SSHDPath, "-D", "-e", "-f", cfg)
	h.sshd = exec.Command(args[0], args[1:]...)
	h.sshd.Stdout, h.sshd.Stderr = logFile, logFile
	h.sshd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	must(t, h.sshd.Start())
	exited := make(chan struct{})
	go func() { _ = h.sshd.Wait(); close(exited) }()
	t.Cleanup(func() {
		// The listener and its per-connection children share the process group.
		_ = syscall.Kill(-h.sshd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-h.sshd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		logFile.Close()
		if t.Failed() {
			if raw, err := os.ReadFile(logFile.Name()); err == nil {
				t.Logf("sshd log of %s:\n%s", h.Address, raw)
			}
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", h.HostPort(), time.Second)
		if err == nil {
			c.Close()
			return h
		}
		select {
		case <-exited:
			raw, _ := os.ReadFile(logFile.Name())
			t.Fatalf("sshd exited at start:\n%s", raw)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("sshd did not listen on %s within 10 s", h.HostPort())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// HostPort is Address:Port.
func (h *Host) HostPort() string { return net.JoinHostPort(h.Address, strconv.Itoa(h.Port)) }

// KeyFile writes KeyPEM to a private file of the test's temporary directory (what a user
// would point private_key = file(...) at) and returns its path.
func (h *Host) KeyFile(t testing.TB) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(p, []byte(h.KeyPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// makeNamespace creates the host's namespace and veth pair, addressed from 10.201.0.0/16
// (a /30 per host), and removes them when the test ends.
func (h *Host) makeNamespace(t testing.TB) error {
	if os.Getenv(NoNetnsEnv) == "1" {
		return fmt.Errorf("%s=1", NoNetnsEnv)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("iproute2 is not installed: %w", err)
	}
	id := randHex(4)
	ns, hostLink, nsLink := "mlct-"+id, "mlh"+id, "mln"+id
	h.rec.Namespace, h.rec.HostLink = ns, hostLink
	h.rec.save(t)
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		return fmt.Errorf("ip netns add: %v: %s", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		// Deleting the namespace destroys its veth end, and with it the pair.
		_ = exec.Command("ip", "link", "del", hostLink).Run()
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			t.Logf("ip netns del %s: %v: %s", ns, err, out)
		}
	})
	// Test packages run in parallel processes: the choice of a free /30 and its use are
	// one step under a lock they all share, so two hosts never get the same subnet.
	unlock, err := lockFile(sweepLockPath())
	if err != nil {
		return err
	}
	defer unlock()
	hostIP, nsIP, err := freeSubnet()
	if err != nil {
		return err
	}
	steps := [][]string{
		{"ip", "link", "add", hostLink, "type", "veth", "peer", "name", nsLink},
		{"ip", "link", "set", nsLink, "netns", ns},
		{"ip", "addr", "add", hostIP + "/30", "dev", hostLink},
		{"ip", "link", "set", hostLink, "up"},
		{"ip", "netns", "exec", ns, "ip", "addr", "add", nsIP + "/30", "dev", nsLink},
		{"ip", "netns", "exec", ns, "ip", "link", "set", nsLink, "up"},
		{"ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"},
	}
	for _, s := range steps {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v: %s", strings.Join(s, " "), err, strings.TrimSpace(string(out)))
		}
	}
	h.Namespace, h.HostLink, h.nsLink, h.Address, h.Port = ns, hostLink, nsLink, nsIP, 22
	return nil
}

// freeSubnet picks a /30 of 10.201.0.0/16 that no interface of this machine uses and
// returns its two host addresses.
func freeSubnet() (hostIP, nsIP string, err error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", "", err
	}
	used := map[uint16]bool{}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			if ip4 := ipn.IP.To4(); ip4 != nil && ip4[0] == 10 && ip4[1] == 201 {
				used[uint16(ip4[2])<<6|uint16(ip4[3]>>2)] = true
			}
		}
	}
	for range 64 {
		var b [2]byte
		_, _ = rand.Read(b[:])
		n := binary.BigEndian.Uint16(b[:]) & 0x3fff // which /30 of the /16
		if !used[n] {
			return fmt.Sprintf("10.201.%d.%d", n>>6, (n&0x3f)*4+1), fmt.Sprintf("10.201.%d.%d", n>>6, (n&0x3f)*4+2), nil
		}
	}
	return "", "", errors.New("no free /30 found in 10.201.0.0/16")
}

// lockFile takes an exclusive flock on path, waiting for it; the returned func releases it.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() { _ = f.Close() }, nil
}

// SetLinkUp takes the host's network link down or up again, inside its namespace: the
// route on this machine stays, so packets to the host are dropped here and never leave
// the machine; established connections stall (nothing is reset) until it is up.
// Namespaced hosts only.
func (h *Host) SetLinkUp(t testing.TB, up bool) {
	t.Helper()
	if h.Namespace == "" {
		t.Fatalf("host %s runs on loopback: it has no link to take down", h.Address)
	}
	state := "down"
	if up {
		state = "up"
	}
	run(t, "ip", "netns", "exec", h.Namespace, "ip", "link", "set", h.nsLink, state)
}

// SetUnreachable makes the host's address unreachable from this machine (an unreachable
// route, so connecting fails at once with "no route to host") or reachable again.
// Namespaced hosts only.
func (h *Host) SetUnreachable(t testing.TB, unreachable bool) {
	t.Helper()
	if h.Namespace == "" {
		t.Fatalf("host %s runs on loopback: it cannot be made unreachable", h.Address)
	}
	route := h.Address + "/32"
	if unreachable {
		h.rec.Routes = append(h.rec.Routes, route)
		h.rec.save(t)
		run(t, "ip", "route", "add", "unreachable", route)
		t.Cleanup(func() { _ = exec.Command("ip", "route", "del", "unreachable", route).Run() })
		return
	}
	run(t, "ip", "route", "del", "unreachable", route)
	h.rec.Routes = slices.DeleteFunc(h.rec.Routes, func(r string) bool { return r == route })
	h.rec.save(t)
}

// DropConnections kills sshd's per-connection processes, so every SSH connection to the
// host ends at once (as when a machine's sshd is restarted); the listener keeps serving.
// It returns how many connections it ended. Processes the connections started (remote
// commands, tasks) are untouched: they see their session end as on a real machine.
func (h *Host) DropConnections(t testing.TB) int {
	t.Helper()
	// ip netns exec execs sshd in place, so the listener is the process started. Each
	// connection has two processes (privilege separation): the monitor, the listener's
	// child, and the monitor's child, which holds the socket and the sessions' pipes. Both
	// go: the second alone keeps the connection open when its monitor dies.
	monitors := children(h.sshd.Process.Pid)
	var pids []int
	for _, pid := range monitors {
		pids = append(pids, pid)
		pids = append(pids, children(pid)...)
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return len(monitors)
}

// children lists the pids of pid's direct children.
func children(pid int) []int {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(raw)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// loopbackAddress picks 127.0.0.x (x from 2 to 254) and a port free on it.
func loopbackAddress(t testing.TB) (string, int) {
	t.Helper()
	var b [1]byte
	_, _ = rand.Read(b[:])
	addr := fmt.Sprintf("127.0.0.%d", 2+int(b[0])%253)
	l, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	must(t, err)
	defer l.Close()
	return addr, l.Addr().(*net.TCPAddr).Port
}

// NewClientKey returns a new ed25519 private key in OpenSSH PEM form and adds its public
// key, with options (authorized_keys syntax), to authorized.
func NewClientKey(t testing.TB, options string, authorized *strings.Builder) string {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	must(t, err)
	block, err := gossh.MarshalPrivateKey(priv, "")
	must(t, err)
	signer, err := gossh.NewSignerFromKey(priv)
	must(t, err)
	authorized.WriteString(options + string(gossh.MarshalAuthorizedKey(signer.PublicKey())))
	return string(pem.EncodeToMemory(block))
}

// ClosedPort returns a port on the host's address where nothing listens: in a namespace
// only sshd's port is open; on loopback, one that was free a moment ago.
func (h *Host) ClosedPort(t testing.TB) int {
	t.Helper()
	if h.Namespace != "" {
		return 2222
	}
	l, err := net.Listen("tcp", net.JoinHostPort(h.Address, "0"))
	must(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func run(t testing.TB, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
