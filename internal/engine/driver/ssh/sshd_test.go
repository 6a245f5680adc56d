package ssh

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"
)

const sshdPath = "/usr/sbin/sshd"

// testServer is a real sshd on loopback with a dedicated user created for the test.
type testServer struct {
	Port        int
	User        string
	UID         int
	Home        string
	Password    string
	KeyPEM      string // accepted for User
	DarwinKey   string // accepted, but its forced command answers every command with "Darwin"
	Fingerprint string // the host key's SHA256 fingerprint
}

func (s *testServer) target() Target {
	return Target{Address: "127.0.0.1", Port: s.Port, Username: s.User, PrivateKeyPEM: s.KeyPEM}
}

// startSSHD starts sshd -D on a free loopback port. It needs root (to create the user)
// and openssh-server; it fails rather than skips without them.
func startSSHD(t *testing.T) *testServer {
	t.Helper()
	if _, err := os.Stat(sshdPath); err != nil {
		t.Fatalf("%s not found: these tests need a real sshd; install it with `apt-get install -y --no-install-recommends openssh-server`", sshdPath)
	}
	if os.Geteuid() != 0 {
		t.Fatalf("these tests must run as root: they create a test user for sshd")
	}
	for _, tool := range []string{"ssh-keygen", "useradd", "userdel", "chpasswd"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: %v", tool, err)
		}
	}
	// The user must traverse the directory to its home and authorized_keys, so it is not
	// a 0700 t.TempDir.
	dir, err := os.MkdirTemp("", "mlc-sshd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	must(t, os.Chmod(dir, 0o755))
	must(t, os.MkdirAll("/run/sshd", 0o755)) // privilege separation directory

	s := &testServer{}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	s.User = "mlct" + hex.EncodeToString(b)
	s.Home = filepath.Join(dir, "home")
	_, _ = rand.Read(b)
	s.Password = "pw-" + hex.EncodeToString(b)
	run(t, "useradd", "-m", "-d", s.Home, "-s", "/bin/sh", s.User)
	t.Cleanup(func() {
		if out, err := exec.Command("userdel", "-f", "-r", s.User).CombinedOutput(); err != nil {
			t.Logf("userdel %s: %v: %s", s.User, err, out)
		}
	})
	cmd := exec.Command("chpasswd")
	cmd.Stdin = strings.NewReader(s.User + ":" + s.Password + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chpasswd: %v: %s", err, out)
	}
	u, err := user.Lookup(s.User)
	must(t, err)
	s.UID, _ = strconv.Atoi(u.Uid)

	hostKey := filepath.Join(dir, "host_ed25519")
	run(t, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", hostKey)
	pubRaw, err := os.ReadFile(hostKey + ".pub")
	must(t, err)
	hostPub, _, _, _, err := gossh.ParseAuthorizedKey(pubRaw)
	must(t, err)
	s.Fingerprint = gossh.FingerprintSHA256(hostPub)

	var authorized strings.Builder
	s.KeyPEM = newClientKey(t, "", &authorized)
	s.DarwinKey = newClientKey(t, `command="echo Darwin" `, &authorized)
	authFile := filepath.Join(dir, "authorized_keys")
	must(t, os.WriteFile(authFile, []byte(authorized.String()), 0o644))

	s.Port = freePort(t)
	cfg := filepath.Join(dir, "sshd_config")
	must(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`ListenAddress 127.0.0.1
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
`, s.Port, hostKey, filepath.Join(dir, "sshd.pid"), authFile, s.User)), 0o644))

	logFile, err := os.Create(filepath.Join(dir, "sshd.log"))
	must(t, err)
	sshd := exec.Command(sshdPath, "-D", "-e", "-f", cfg)
	sshd.Stdout, sshd.Stderr = logFile, logFile
	sshd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	must(t, sshd.Start())
	exited := make(chan struct{})
	go func() { _ = sshd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = sshd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = sshd.Process.Kill()
			<-exited
		}
		logFile.Close()
		if t.Failed() {
			if raw, err := os.ReadFile(logFile.Name()); err == nil {
				t.Logf("sshd log:\n%s", raw)
			}
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)), time.Second)
		if err == nil {
			c.Close()
			return s
		}
		select {
		case <-exited:
			raw, _ := os.ReadFile(logFile.Name())
			t.Fatalf("sshd exited at start:\n%s", raw)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("sshd did not listen on port %d within 10 s", s.Port)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// newClientKey returns a new ed25519 private key in OpenSSH PEM form and adds its public
// key, with options, to authorized.
func newClientKey(t *testing.T, options string, authorized *strings.Builder) string {
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

// freePort returns a loopback port nothing listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
