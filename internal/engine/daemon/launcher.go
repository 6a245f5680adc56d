package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/containerrt"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/nodeagent/proc"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/tlsconfig"
)

// DefaultDataDir is $MLCOMPUTE_HOME, else $XDG_DATA_HOME/mlcompute, else
// ~/.local/share/mlcompute.
func DefaultDataDir() (string, error) {
	if d := os.Getenv("MLCOMPUTE_HOME"); d != "" {
		return d, nil
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "mlcompute"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("finding the default data dir: %w (set MLCOMPUTE_HOME)", err)
	}
	return filepath.Join(home, ".local", "share", "mlcompute"), nil
}

// Launcher starts the embedded engine of a data dir when none answers on its socket.
type Launcher struct {
	DataDir string
	// Command is the argv that runs "serve" for this binary, e.g.
	// [terraform-provider-mlcompute engine serve]; --data-dir is appended.
	Command []string
	// StartTimeout bounds the wait for a started engine to answer (default 20 s).
	StartTimeout time.Duration
	Clock        clock.Clock

	mu sync.Mutex
}

// ErrNoEmbeddedEngine is Ensure's answer on Windows, where the engine does not run: the
// provider and the CLI work there against a remote engine only.
var ErrNoEmbeddedEngine = errors.New("the engine does not run on Windows (neither embedded nor mlcompute serve): set the provider's endpoint (or MLCOMPUTE_ENDPOINT) to a running engine, e.g. https://host:8443")

// Endpoint is the embedded engine's socket as a client endpoint.
func (l *Launcher) Endpoint() string {
	return "unix://" + filepath.Join(l.DataDir, SocketFile)
}

// Ensure makes sure an engine answers on the data dir's socket, starting one as a detached
// process (its own session, output in engine.log) when none does. Two callers racing here
// may both start one; the data dir's lock lets exactly one of them serve.
func (l *Launcher) Ensure(ctx context.Context) error {
	if runtime.GOOS == "windows" {
		return ErrNoEmbeddedEngine
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	probe, err := client.New(l.Endpoint(), "", client.WithAttempts(1))
	if err != nil {
		return err
	}
	if healthy(ctx, probe) {
		return nil
	}
	if err := os.MkdirAll(l.DataDir, 0o700); err != nil {
		return fmt.Errorf("creating data dir: %w", err)
	}
	logPath := filepath.Join(l.DataDir, LogFile)
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("opening engine log: %w", err)
	}
	defer logFile.Close()
	argv := append(append([]string(nil), l.Command...), "--data-dir", l.DataDir)
	if addr := containerdAddress(); addr != "" {
		argv = append(argv, "--containerd-address", addr)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = proc.SessionAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting embedded engine %s: %w", argv[0], err)
	}
	exited := make(chan error, 1)
	// Reap the child if it exits while we live; once we exit, init adopts it.
	go func() { exited <- cmd.Wait() }()

	clk := l.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	timeout := l.StartTimeout
	if timeout == 0 {
		timeout = 20 * time.Second
	}
	deadline := clk.Now().Add(timeout)
	var exitErr error
	for clk.Now().Before(deadline) {
		if healthy(ctx, probe) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case exitErr = <-exited:
			exited = nil
			var status *exec.ExitError
			if errors.As(exitErr, &status) && status.ExitCode() == ExitAlreadyRunning {
				// It lost the lock race: another engine is starting and will answer.
				continue
			}
			// It could not start (a damaged store, a bad flag, an unusable data dir):
			// waiting out the timeout would only delay the reason.
			if exitErr == nil {
				exitErr = errors.New("exited with status 0")
			}
			return startFailed(exitErr, logPath)
		case <-clk.After(50 * time.Millisecond):
		}
	}
	if exitErr != nil { // it lost the lock race, and the winner never answered
		return startFailed(exitErr, logPath)
	}
	return fmt.Errorf("embedded engine did not become healthy within %s; see %s", timeout, logPath)
}

// containerdAddress is the containerd the embedded engine's local nodes run container
// images with: the socket MLCOMPUTE_CONTAINERD_ADDRESS names, else containerd's default
// socket when it exists, else none ("").
func containerdAddress() string {
	if addr := os.Getenv(containerrt.AddressEnv); addr != "" {
		return addr
	}
	if fi, err := os.Stat(containerrt.DefaultAddress); err == nil && fi.Mode().Type() == os.ModeSocket {
		return containerrt.DefaultAddress
	}
	return ""
}

// startFailed reports an engine process that exited, with the reason it logged last.
func startFailed(exitErr error, logPath string) error {
	if last := lastLine(logPath); last != "" {
		return fmt.Errorf("embedded engine did not start (%v): %s (log: %s)", exitErr, last, logPath)
	}
	return fmt.Errorf("embedded engine did not start (%v); see %s", exitErr, logPath)
}

// lastLine returns the last non-empty line of the file at path (read from its last 4 KiB),
// where a failed engine wrote why, or "".
func lastLine(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(fi.Size()-4096, 0)
	buf := make([]byte, fi.Size()-off)
	n, _ := f.ReadAt(buf, off)
	lines := strings.Split(strings.TrimRight(string(buf[:n]), "\n"), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// EndpointToken returns the token to use for endpoint: token when set; else, for an
// http(s) endpoint on loopback, the one an engine serving dataDir made there (LocalToken);
// else "". A token file that exists but cannot be used is an error.
func EndpointToken(endpoint, token, dataDir string) (string, error) {
	if token != "" || dataDir == "" {
		return token, nil
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !IsLoopbackHost(u.Hostname()) {
		return "", nil
	}
	return LocalToken(dataDir)
}

// EndpointCA returns the CA to pin for endpoint: caPEM when set; else the CA `mlcompute
// login` stored for it in dataDir (KnownCAFile); else, for an https endpoint on loopback,
// the CA an engine serving dataDir made there (tlsconfig.CAFile), if any; else nil (the
// system roots).
func EndpointCA(endpoint string, caPEM []byte, dataDir string) []byte {
	if len(caPEM) > 0 || dataDir == "" {
		return caPEM
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme != "https" {
		return nil
	}
	if raw, err := os.ReadFile(KnownCAFile(dataDir, endpoint)); err == nil {
		return raw
	}
	if !IsLoopbackHost(u.Hostname()) {
		return nil
	}
	raw, err := os.ReadFile(filepath.Join(dataDir, tlsconfig.CAFile))
	if err != nil {
		return nil
	}
	return raw
}

// KnownCAFile is where `mlcompute login` keeps the CA it was told to trust for endpoint:
// <dataDir>/known_engines/<host>_<port>.pem.
func KnownCAFile(dataDir, endpoint string) string {
	u, err := url.Parse(endpoint)
	host, port := "", ""
	if err == nil {
		host, port = u.Hostname(), u.Port()
	}
	if port == "" {
		port = "443"
	}
	name := strings.NewReplacer(":", "_", "/", "_", "\\", "_").Replace(host) + "_" + port + ".pem"
	return filepath.Join(dataDir, "known_engines", name)
}

func healthy(ctx context.Context, c *client.Client) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := c.Status(ctx)
	return err == nil || !client.IsUnreachable(err)
}

// ConnectOptions say how to reach an engine: Endpoint and Token for a running one, or
// DataDir and Command to use (and if needed start) the embedded one. With an Endpoint on
// loopback TCP and no Token, the token serve made in DataDir is used (see LocalToken).
type ConnectOptions struct {
	Endpoint string
	Token    string
	DataDir  string
	Command  []string
	// CACert is the PEM of the CA the engine's certificate must chain to (an https
	// endpoint). Empty: the system roots, and for a loopback engine the CA serve made in
	// DataDir, when there is one.
	CACert []byte
	// ClientOptions adjust the client (how long it waits for an engine that is away).
	ClientOptions []client.Option
}

// Connect returns a client for the engine the options name. For the embedded engine the
// client restarts the engine by itself if it dies between or during calls.
func Connect(ctx context.Context, o ConnectOptions) (*client.Client, error) {
	if o.Endpoint != "" {
		token, err := EndpointToken(o.Endpoint, o.Token, o.DataDir)
		if err != nil {
			return nil, err
		}
		opts := o.ClientOptions
		if strings.HasPrefix(o.Endpoint, "https://") {
			cfg, err := tlsconfig.Client(EndpointCA(o.Endpoint, o.CACert, o.DataDir))
			if err != nil {
				return nil, err
			}
			opts = append(slices.Clone(opts), client.WithTLS(cfg))
		}
		return client.New(o.Endpoint, token, opts...)
	}
	if o.DataDir == "" {
		return nil, errors.New("no endpoint and no data dir: set one of them")
	}
	dir, err := filepath.Abs(o.DataDir)
	if err != nil {
		return nil, fmt.Errorf("resolving data dir: %w", err)
	}
	l := &Launcher{DataDir: dir, Command: o.Command}
	// An engine that ever listened here left its socket: calling it straight away spares a
	// health check per command (a CLI call's first byte waits for it). Should it be gone,
	// the first call cannot connect, and the client starts one (WithReconnect) and calls
	// again. Without a socket, one is started now.
	if _, err := os.Stat(filepath.Join(dir, SocketFile)); err != nil {
		if err := l.Ensure(ctx); err != nil {
			return nil, err
		}
	}
	return client.New(l.Endpoint(), "", append([]client.Option{client.WithReconnect(l.Ensure)}, o.ClientOptions...)...)
}
