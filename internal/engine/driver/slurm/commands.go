package slurm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/atomicfile"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/ssh"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/nodeagent/proc"
)

// localShell runs sh command lines on this machine, each in a process group of its own:
// when ctx ends the group gets SIGTERM (srun passes it on to its step) and, 5 s later,
// the process SIGKILL.
type localShell struct{}

func (localShell) RunShell(ctx context.Context, cmd string, stdin io.Reader, stdout io.Writer) ([]byte, int, error) {
	c := exec.Command("sh", "-c", cmd)
	c.Stdin, c.Stdout = stdin, stdout
	var stderr bytes.Buffer
	c.Stderr = &stderr
	c.SysProcAttr = proc.GroupAttr()
	if err := c.Start(); err != nil {
		return nil, 0, fmt.Errorf("running sh: %w", err)
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			_ = proc.KillGroup(c.Process.Pid, syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				_ = proc.KillGroup(c.Process.Pid, syscall.SIGKILL)
			}
		case <-done:
		}
	}()
	err := c.Wait()
	close(done)
	if ctx.Err() != nil {
		return nil, 0, ctx.Err()
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return stderr.Bytes(), 128 + int(ws.Signal()), nil
		}
		return stderr.Bytes(), ee.ExitCode(), nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("running sh: %w", err)
	}
	return stderr.Bytes(), 0, nil
}

// loginShell runs sh command lines on a login node over SSH, through one connection that
// is dialled again when it breaks. The login node's host key is trusted on first use and
// pinned from then on: every later connection, and one after an engine restart when
// hostKeyFile keeps it, must present the same key.
type loginShell struct {
	// target's HostKeyFingerprint is set by the first connection when hostKeyFile held
	// none; it is read and written only by the holder of conns' token.
	target      ssh.Target
	hostKeyFile string
	conns       chan *ssh.Client // holds the connection, or nil when there is none
}

func newLoginShell(login, keyFile, hostKeyFile string) (*loginShell, error) {
	user, host, ok := strings.Cut(login, "@")
	if !ok || user == "" || host == "" {
		return nil, driver.Permanent(fmt.Errorf("--slurm-login %q: want user@host or user@host:port", login))
	}
	t := ssh.Target{Address: host, Username: user}
	if h, p, ok := strings.Cut(host, ":"); ok {
		port, err := strconv.Atoi(p)
		if err != nil {
			return nil, driver.Permanent(fmt.Errorf("--slurm-login %q: bad port %q", login, p))
		}
		t.Address, t.Port = h, port
	}
	key, err := loginKey(keyFile)
	if err != nil {
		return nil, err
	}
	t.PrivateKeyPEM = key
	if hostKeyFile != "" {
		raw, err := os.ReadFile(hostKeyFile)
		switch {
		case err == nil:
			t.HostKeyFingerprint = strings.TrimSpace(string(raw))
		case !errors.Is(err, fs.ErrNotExist):
			return nil, driver.Permanent(fmt.Errorf("reading the login node's pinned host key: %w", err))
		}
	}
	s := &loginShell{target: t, hostKeyFile: hostKeyFile, conns: make(chan *ssh.Client, 1)}
	s.conns <- nil
	return s, nil
}

// loginKey reads the SSH private key for the login node: keyFile (Config.LoginKeyFile),
// else the engine user's ~/.ssh/id_ed25519, then id_rsa.
func loginKey(keyFile string) (string, error) {
	paths := []string{keyFile}
	if home, err := os.UserHomeDir(); err == nil {
		paths = append(paths, home+"/.ssh/id_ed25519", home+"/.ssh/id_rsa")
	}
	for _, p := range paths {
		if p == "" {
			continue
		}
		if raw, err := os.ReadFile(p); err == nil {
			return string(raw), nil
		}
	}
	return "", driver.Permanent(errors.New("no SSH key for --slurm-login: set MLCOMPUTE_SLURM_SSH_KEY or create ~/.ssh/id_ed25519"))
}

func (s *loginShell) client(ctx context.Context) (*ssh.Client, error) {
	var c *ssh.Client
	select {
	case c = <-s.conns:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if c == nil {
		var err error
		if c, err = s.dial(ctx); err != nil {
			s.conns <- nil
			return nil, err
		}
	}
	s.conns <- c
	return c, nil
}

// dial connects to the login node. The first connection that finds no pinned host key pins
// the one it verified, in hostKeyFile too when there is one; a key other than the pinned
// one is refused, naming the file to remove when the key changed on purpose.
func (s *loginShell) dial(ctx context.Context) (*ssh.Client, error) {
	c, err := ssh.Dial(ctx, s.target)
	switch {
	case ssh.IsHostKeyMismatch(err) && s.hostKeyFile != "":
		return nil, driver.Permanent(fmt.Errorf("--slurm-login %s: %w; the key pinned at the first connection is kept in %s: remove that file if the login node's key changed on purpose",
			s.target, err, s.hostKeyFile))
	case err != nil:
		return nil, err
	case s.target.HostKeyFingerprint != "":
		return c, nil
	}
	seen := c.HostKeyFingerprint()
	if s.hostKeyFile != "" {
		// Atomically: a pin torn by a crash would refuse the login node at the next start.
		if err := atomicfile.Write(s.hostKeyFile, []byte(seen+"\n"), 0o600); err != nil {
			_ = c.Close()
			return nil, driver.Permanent(fmt.Errorf("pinning the login node's host key: %w", err))
		}
	}
	s.target.HostKeyFingerprint = seen
	return c, nil
}

func (s *loginShell) RunShell(ctx context.Context, cmd string, stdin io.Reader, stdout io.Writer) ([]byte, int, error) {
	c, err := s.client(ctx)
	if err != nil {
		return nil, 0, err
	}
	stderr, code, err := c.RunShell(ctx, cmd, stdin, stdout)
	if err != nil && ctx.Err() == nil {
		// The connection may have broken: drop it, so the next call dials again.
		<-s.conns
		_ = c.Close()
		s.conns <- nil
		return nil, 0, driver.Transient(fmt.Errorf("on the login node %s: %w", s.target, err))
	}
	return stderr, code, err
}

// command runs a Slurm command with its arguments through the shell and returns its
// standard output. A command that exits non-zero is a *commandError.
func (d *Driver) command(ctx context.Context, args ...string) (string, error) {
	var out bytes.Buffer
	stderr, code, err := d.sh.RunShell(ctx, quoteArgs(args), strings.NewReader(""), &out)
	if err != nil {
		return "", fmt.Errorf("running %s: %w", args[0], err)
	}
	if code != 0 {
		return out.String(), &commandError{name: args[0], code: code, stderr: strings.TrimSpace(string(stderr))}
	}
	return out.String(), nil
}

// commandError is a Slurm command that failed, with what it said.
type commandError struct {
	name   string
	code   int
	stderr string
}

func (e *commandError) Error() string {
	msg := e.stderr
	if msg == "" {
		msg = "no message"
	}
	return fmt.Sprintf("%s exited %d: %s", e.name, e.code, msg)
}

// transientMarks are what Slurm commands say when the controller is busy, restarting or
// unreachable: trying again later works.
var transientMarks = []string{
	"Unable to contact slurm controller", "Socket timed out", "Connection refused",
	"temporarily unable", "try again", "Slurm backup controller in standby mode",
	"Zero Bytes were transmitted", "Communication connection failure",
}

// classify marks a failed Slurm command's error: transient when the controller could not
// be reached, permanent when sbatch refused the job (a bad partition, account, QOS or
// constraint: trying again does not help), and transient otherwise with the cause kept.
func classify(err error) error {
	var ce *commandError
	if !errors.As(err, &ce) {
		return driver.Transient(err)
	}
	if ce.code == 127 {
		return driver.Permanent(fmt.Errorf("%w (is Slurm's client installed where the engine runs its commands?)", err))
	}
	for _, m := range transientMarks {
		if strings.Contains(strings.ToLower(ce.stderr), strings.ToLower(m)) {
			return driver.Transient(err)
		}
	}
	if ce.name == "sbatch" {
		return driver.Permanent(err)
	}
	return driver.Transient(err)
}

// quoteArgs renders a command line for sh.
func quoteArgs(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=./:,@%+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// job is one line of squeue.
type job struct {
	ID      string
	State   string // PENDING, RUNNING, COMPLETING, ...
	Submit  time.Time
	Node    string // the Slurm node name, once running
	Reason  string
	Name    string
	Comment string
}

// squeueFormat is what parseJobs reads: the comment last, so it may hold the separator.
const squeueFormat = "%i|%T|%V|%N|%r|%j|%k"

func parseJobs(out string) []job {
	var jobs []job
	for _, line := range strings.Split(out, "\n") {
		f := strings.SplitN(strings.TrimSpace(line), "|", 7)
		if len(f) != 7 {
			continue
		}
		submit, _ := time.ParseInLocation("2006-01-02T15:04:05", f[2], time.Local)
		jobs = append(jobs, job{ID: f[0], State: f[1], Submit: submit, Node: f[3], Reason: f[4], Name: f[5], Comment: f[6]})
	}
	return jobs
}

// live says the job holds (or waits for) its node: pending, configuring, running or
// suspended. A completing, cancelled, failed, timed out or preempted job is over.
func (j job) live() bool {
	switch j.State {
	case "PENDING", "CONFIGURING", "RUNNING", "SUSPENDED", "RESIZING":
		return true
	}
	return false
}

// running says the job's node is allocated and its holder started.
func (j job) running() bool { return j.State == "RUNNING" && j.Node != "" }
