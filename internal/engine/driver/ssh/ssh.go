// Package ssh reaches attached machines over SSH: Probe checks that a machine can be
// attached (reachable, credentials accepted, host key as pinned, Linux) and reads its size;
// Start, Status, Output and Kill run tasks on it.
//
// A task's state lives in files on the machine, in ~/.mlcompute/tasks/<key>/: a small
// POSIX sh wrapper started in its own session records the task's pid (which is also its
// process group), its combined output in output.log and its exit status in exit_code
// (written to a temporary file and renamed). The task keeps running when the SSH
// connection drops or the engine restarts, and a later connection reads everything back.
//
// Every call dials its own connection unless it goes through a Client from Dial. Driver
// (driver.go) makes this a node driver for attached machines. Only Driver logs, and no log
// line or error carries a password or private key.
package ssh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
)

// DefaultPort is the SSH port used when Target.Port is 0.
const DefaultPort = 22

// defaultConnectTimeout bounds connect plus handshake when ctx has no deadline.
const defaultConnectTimeout = 15 * time.Second

// Target says how to reach a machine. Password and PrivateKeyPEM are secrets: Target's
// String omits them, and this package never logs them or puts them in errors.
type Target struct {
	Address string
	// Port is the SSH port; 0 means DefaultPort.
	Port     int
	Username string
	// Password and PrivateKeyPEM: at least one. Both may be set; the key is tried first.
	Password      string
	PrivateKeyPEM string
	// HostKeyFingerprint pins the host key in OpenSSH "SHA256:..." form. Empty accepts
	// the first key seen, which the caller should then persist (HostInfo or
	// Client.HostKeyFingerprint) and pass from then on.
	HostKeyFingerprint string
}

// String returns user@host:port, never a secret.
func (t Target) String() string { return t.Username + "@" + t.hostPort() }

// GoString keeps %#v from printing secrets.
func (t Target) GoString() string { return "ssh.Target{" + t.String() + "}" }

func (t Target) hostPort() string {
	port := t.Port
	if port == 0 {
		port = DefaultPort
	}
	return net.JoinHostPort(t.Address, strconv.Itoa(port))
}

// HostInfo describes an attachable machine.
type HostInfo struct {
	// OS is what `uname -s` printed ("Linux").
	OS       string
	VCPUs    int64
	MemoryGB float64
	// HostKeyFingerprint is the host key seen, in OpenSSH "SHA256:..." form.
	HostKeyFingerprint string
}

// Client is one SSH connection to a machine. It is safe for concurrent use: every call
// opens its own session on the connection.
type Client struct {
	target      Target
	conn        *gossh.Client
	fingerprint string
}

// Dial connects to t, verifies its host key (or accepts the first one when
// t.HostKeyFingerprint is empty) and authenticates. Errors are *Error for an unreachable
// host, a refused connection, rejected credentials, a host key mismatch or an invalid
// target. When ctx has no deadline, connecting gives up after 15 s.
func Dial(ctx context.Context, t Target) (*Client, error) {
	addr := t.hostPort()
	if t.Address == "" || t.Username == "" {
		return nil, &Error{Kind: KindInvalidTarget, Address: addr, Reason: "address and username are required"}
	}
	if t.Port < 0 || t.Port > 65535 {
		return nil, &Error{Kind: KindInvalidTarget, Address: addr, Reason: "port must be between 1 and 65535"}
	}
	auth, err := authMethods(t)
	if err != nil {
		return nil, &Error{Kind: KindInvalidTarget, Address: addr, Reason: err.Error()}
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultConnectTimeout)
		defer cancel()
	}

	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, dialError(ctx, addr, err)
	}

	var (
		mu       sync.Mutex
		seen     string
		mismatch bool
	)
	want := normalizeFingerprint(t.HostKeyFingerprint)
	cfg := &gossh.ClientConfig{
		User: t.Username,
		Auth: auth,
		HostKeyCallback: func(_ string, _ net.Addr, key gossh.PublicKey) error {
			fp := gossh.FingerprintSHA256(key)
			mu.Lock()
			defer mu.Unlock()
			seen = fp
			if want != "" && normalizeFingerprint(fp) != want {
				mismatch = true
				return errors.New("host key mismatch")
			}
			return nil
		},
	}
	// The handshake has no context of its own: a deadline on the connection bounds it and
	// closing the connection cancels it.
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = nc.Close() })
	cc, chans, reqs, err := gossh.NewClientConn(nc, addr, cfg)
	stopped := stop()
	if err != nil {
		_ = nc.Close()
		mu.Lock()
		defer mu.Unlock()
		switch {
		case mismatch:
			return nil, &Error{Kind: KindHostKeyMismatch, Address: addr, Expected: t.HostKeyFingerprint, Actual: seen}
		case strings.Contains(err.Error(), "unable to authenticate"):
			return nil, &Error{Kind: KindAuthFailed, Address: addr, Username: t.Username, Err: err}
		case !stopped || isTimeout(err):
			// The connection's deadline (ctx's) can fire a moment before ctx reports it.
			cause := context.Cause(ctx)
			if cause == nil {
				cause = context.DeadlineExceeded
			}
			return nil, &Error{Kind: KindUnreachable, Address: addr, Err: fmt.Errorf("no SSH handshake before the deadline: %w", cause)}
		}
		// The connection broke during the handshake (reset, closed): try again later.
		return nil, driver.Transient(fmt.Errorf("ssh handshake with %s: %w", addr, err))
	}
	if !stopped { // ctx ended right after the handshake closed the connection
		_ = cc.Close()
		return nil, fmt.Errorf("connecting to %s: %w", addr, ctx.Err())
	}
	_ = nc.SetDeadline(time.Time{})
	mu.Lock()
	fp := seen
	mu.Unlock()
	return &Client{target: t, conn: gossh.NewClient(cc, chans, reqs), fingerprint: fp}, nil
}

// HostKeyFingerprint returns the host key the connection verified, "SHA256:..." form.
func (c *Client) HostKeyFingerprint() string { return c.fingerprint }

// Close closes the connection. Tasks started through it keep running.
func (c *Client) Close() error { return c.conn.Close() }

// Probe dials t and returns what Client.Probe returns.
func Probe(ctx context.Context, t Target) (HostInfo, error) {
	c, err := Dial(ctx, t)
	if err != nil {
		return HostInfo{}, err
	}
	defer c.Close()
	return c.Probe(ctx)
}

// Probe checks that the machine runs Linux (a *Error of KindNotLinux otherwise) and reads
// its vCPUs (nproc) and memory (MemTotal of /proc/meminfo, in GiB rounded to 0.01).
func (c *Client) Probe(ctx context.Context) (HostInfo, error) {
	info := HostInfo{HostKeyFingerprint: c.fingerprint}
	out, _, code, err := c.run(ctx, "uname -s", "")
	if err != nil {
		return HostInfo{}, fmt.Errorf("probing %s: %w", c.target.hostPort(), err)
	}
	info.OS = strings.TrimSpace(string(out))
	if code != 0 || info.OS != "Linux" {
		osName := info.OS
		if code != 0 || osName == "" {
			osName = "unknown (uname -s failed)"
		}
		return HostInfo{}, &Error{Kind: KindNotLinux, Address: c.target.hostPort(), OS: osName}
	}
	out, stderr, code, err := c.run(ctx, "nproc && grep '^MemTotal:' /proc/meminfo", "")
	if err != nil {
		return HostInfo{}, fmt.Errorf("probing %s: %w", c.target.hostPort(), err)
	}
	if code != 0 {
		return HostInfo{}, fmt.Errorf("probing %s: reading nproc and /proc/meminfo exited %d: %s",
			c.target.hostPort(), code, strings.TrimSpace(string(stderr)))
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		return HostInfo{}, fmt.Errorf("probing %s: unexpected output %q", c.target.hostPort(), out)
	}
	info.VCPUs, err = strconv.ParseInt(strings.TrimSpace(lines[0]), 10, 64)
	if err != nil || info.VCPUs < 1 {
		return HostInfo{}, fmt.Errorf("probing %s: unexpected nproc output %q", c.target.hostPort(), lines[0])
	}
	f := strings.Fields(lines[1]) // MemTotal:  16314276 kB
	if len(f) != 3 || f[2] != "kB" {
		return HostInfo{}, fmt.Errorf("probing %s: unexpected MemTotal line %q", c.target.hostPort(), lines[1])
	}
	kb, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return HostInfo{}, fmt.Errorf("probing %s: unexpected MemTotal line %q", c.target.hostPort(), lines[1])
	}
	info.MemoryGB = math.Round(float64(kb)/(1024*1024)*100) / 100
	return info, nil
}

// run runs cmd in a new session with stdin as its input and returns its output and exit
// status. Secrets go through stdin, never cmd: a command line is visible to every user
// of the machine. When ctx ends the session is closed.
func (c *Client) run(ctx context.Context, cmd, stdin string) (stdout, stderr []byte, code int, err error) {
	return c.runInput(ctx, cmd, strings.NewReader(stdin))
}

// runInput is run with any reader as the command's input.
func (c *Client) runInput(ctx context.Context, cmd string, stdin io.Reader) (stdout, stderr []byte, code int, err error) {
	return c.runOutput(ctx, cmd, stdin, &bytes.Buffer{})
}

// RunShell runs cmd in a new session with stdin as its input and its output written to
// stdout; it returns the standard error and the exit status. It makes a Client a Shell.
func (c *Client) RunShell(ctx context.Context, cmd string, stdin io.Reader, stdout io.Writer) (stderr []byte, code int, err error) {
	_, stderr, code, err = c.runOutput(ctx, cmd, stdin, writerOutput{stdout})
	return stderr, code, err
}

// writerOutput is an outputBuffer that passes the output on and keeps none of it.
type writerOutput struct{ io.Writer }

func (writerOutput) Bytes() []byte { return nil }

// outputBuffer collects a command's output.
type outputBuffer interface {
	io.Writer
	Bytes() []byte
}

// runOutput is runInput with the output collected by out.
func (c *Client) runOutput(ctx context.Context, cmd string, stdin io.Reader, out outputBuffer) (stdout, stderr []byte, code int, err error) {
	s, err := c.conn.NewSession()
	if err != nil {
		return nil, nil, 0, fmt.Errorf("opening session: %w", err)
	}
	defer s.Close()
	var errb bytes.Buffer
	s.Stdin = stdin
	s.Stdout = out
	s.Stderr = &errb
	stop := context.AfterFunc(ctx, func() { _ = s.Close() })
	defer stop()
	err = s.Run(cmd)
	if ctx.Err() != nil {
		return nil, nil, 0, ctx.Err()
	}
	var ee *gossh.ExitError
	if errors.As(err, &ee) {
		return out.Bytes(), errb.Bytes(), ee.ExitStatus(), nil
	}
	if err != nil {
		return nil, nil, 0, fmt.Errorf("running remote command: %w", err)
	}
	return out.Bytes(), errb.Bytes(), 0, nil
}

func authMethods(t Target) ([]gossh.AuthMethod, error) {
	var auth []gossh.AuthMethod
	if t.PrivateKeyPEM != "" {
		signer, err := gossh.ParsePrivateKey([]byte(t.PrivateKeyPEM))
		if err != nil {
			var pe *gossh.PassphraseMissingError
			if errors.As(err, &pe) {
				return nil, errors.New("the private key is protected by a passphrase, which is not supported")
			}
			// The parser's message names the format problem, never the key's content.
			return nil, fmt.Errorf("parsing private key: %w", err)
		}
		auth = append(auth, gossh.PublicKeys(signer))
	}
	if t.Password != "" {
		pw := t.Password
		auth = append(auth, gossh.Password(pw),
			gossh.KeyboardInteractive(func(_, _ string, questions []string, _ []bool) ([]string, error) {
				answers := make([]string, len(questions))
				for i := range answers {
					answers[i] = pw
				}
				return answers, nil
			}))
	}
	if len(auth) == 0 {
		return nil, errors.New("a password or a private key is required")
	}
	return auth, nil
}

func dialError(ctx context.Context, addr string, err error) error {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return &Error{Kind: KindConnectionRefused, Address: addr, Err: err}
	case errors.Is(err, context.Canceled) && !errors.Is(context.Cause(ctx), context.DeadlineExceeded):
		return fmt.Errorf("connecting to %s: %w", addr, err)
	}
	// Timeouts, no route, network down, unknown host name.
	return &Error{Kind: KindUnreachable, Address: addr, Err: err}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// normalizeFingerprint makes "SHA256:abc=", "sha256:abc" and "abc" compare equal.
func normalizeFingerprint(fp string) string {
	fp = strings.TrimSpace(fp)
	if i := strings.IndexByte(fp, ':'); i >= 0 && strings.EqualFold(fp[:i], "SHA256") {
		fp = fp[i+1:]
	}
	return strings.TrimRight(fp, "=")
}
