// Package daemon runs an engine as a long-lived process (mlcompute serve) and starts the
// embedded engine on demand for the provider and the CLI (Launcher, Connect).
package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"k8s.io/utils/clock"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/atomicfile"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/artifacts"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/auth"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/kubernetes"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/local"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/route"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/slurm"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/ssh"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/metrics"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/nodeagent"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/nodeagent/proc"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/server"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/snapshot"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// File names inside a data dir.
const (
	SocketFile = "engine.sock"
	LockFile   = "engine.lock"
	LogFile    = "engine.log"
	StoreFile  = "state.db"
	// EngineIDFile holds the engine's id, made at the first start: the slurm driver names
	// its jobs with it.
	EngineIDFile = "engine-id"
	// SlurmLoginHostKeyFile pins the host key of serve --slurm-login's login node, trusted
	// at the first connection.
	SlurmLoginHostKeyFile = "slurm-login-host-key"
	// TokenFile holds the API token serve makes for a TCP listener given no --token-file;
	// the CLI and provider on the same machine read it from there.
	TokenFile = "api.token"
	// NodesDir and SnapshotsDir hold the local nodes' and the code snapshots' files.
	NodesDir     = "nodes"
	SnapshotsDir = "snapshots"
	// ArtifactsDir holds the store of job outputs (package artifacts).
	ArtifactsDir = "artifacts"
)

// DefaultMaxOutputSize is the largest output a job may leave unless serve is told
// otherwise (--max-output-size): 20 GB.
const DefaultMaxOutputSize = 20_000_000_000

// DefaultIdleExit is how long an engine with nothing to manage and no API calls stays up.
const DefaultIdleExit = 10 * time.Minute

// ErrAlreadyRunning means another engine holds the data dir's lock.
var ErrAlreadyRunning = errors.New("an engine is already running for this data dir")

// ExitAlreadyRunning is serve's exit status when another engine holds the data dir's lock.
// A launcher that started it then waits for that engine to answer; any other exit status
// means the engine could not start, and the launcher says why at once.
const ExitAlreadyRunning = 3

// Options configure a daemon.
type Options struct {
	DataDir string
	// Listen is unix:///path or tcp://host:port; empty means <data_dir>/engine.sock.
	Listen string
	// ScoringListen is host:port of the online endpoints' scoring router; empty means the
	// address of the first start (kept in the store), at first a free loopback port.
	ScoringListen string
	// Token, when set, is required on every API call. A TCP listener always has one: when
	// Token is empty, Run uses the data dir's TokenFile, making it first if needed.
	Token     string
	Locations []string
	// Nodes is the node driver: "local" (default), "slurm" (configured by Slurm) or
	// "kubernetes" (configured by Kubernetes).
	Nodes string
	// Slurm configures the slurm driver (Nodes "slurm"); its EngineID is set from the
	// data dir (EngineIDFile), so a restarted engine finds its jobs again.
	Slurm slurm.Config
	// Kubernetes configures the kubernetes driver (Nodes "kubernetes"); its EngineID is
	// set from the data dir as Slurm's is. Its Image (serve's --kube-image, else
	// MLCOMPUTE_KUBE_IMAGE) is also the image of job pods on an attached cluster that names
	// none.
	Kubernetes kubernetes.Config
	// AgentArgv runs this binary's node agent (a local node); --dir is appended.
	AgentArgv []string
	// ContainerdAddress is the containerd socket local nodes run tasks in a container with
	// (serve --containerd-address); empty: none.
	ContainerdAddress string
	// CapacityVCPUs bounds the vCPUs all nodes together may hold; 0 means unlimited.
	CapacityVCPUs int64
	// GPUs are the machine's GPUs local nodes get (serve --gpus); nil means FakeGPUs fake
	// ones when set, else those found on the machine (nvidia-smi -L, /dev/nvidia<N>).
	GPUs     []string
	FakeGPUs int
	// MinIdleShutdown is the shortest idle_time_before_shutdown an instance may ask for.
	MinIdleShutdown time.Duration
	// IdleExit is how long to stay up with nothing to manage and no API calls; 0 means never.
	IdleExit time.Duration
	// MaxOutputSize bounds each output a job leaves (0: no bound).
	MaxOutputSize int64
	Version       string
	Logger        hclog.Logger
	Clock         clock.WithTicker
	// TLS says which TCP listeners serve TLS, with which certificate.
	TLS TLSOptions
	// Ready, when set, receives the listening address once the API serves.
	Ready func(addr string)
}

// Run serves the engine until ctx ends, the API asks for shutdown, the engine has been idle
// for IdleExit, or the data dir disappears.
func Run(ctx context.Context, opts Options) error {
	if runtime.GOOS == "windows" {
		return ErrNoEmbeddedEngine
	}
	if err := opts.TLS.validate(); err != nil {
		return err
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	log := opts.Logger.Named("daemon")
	dir, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return fmt.Errorf("resolving data dir: %w", err)
	}
	opts.DataDir = dir
	if err := secureDir(opts.DataDir); err != nil {
		return fmt.Errorf("creating data dir: %w", err)
	}
	lock, err := acquireLock(filepath.Join(opts.DataDir, LockFile))
	if err != nil {
		return err
	}
	defer lock.Close()
	if opts.Token == "" && isTCP(opts.Listen) {
		token, path, made, err := EnsureTokenFile(opts.DataDir)
		if err != nil {
			return err
		}
		opts.Token = token
		if made {
			log.Info("made an API token for the TCP listener", "token_file", path)
		} else {
			log.Info("using the data dir's API token for the TCP listener", "token_file", path)
		}
	}
	if err := secureFiles(opts.DataDir); err != nil {
		return err
	}

	st, err := store.Open(filepath.Join(opts.DataDir, StoreFile), time.Second)
	if err != nil {
		return err
	}
	defer st.Close()

	for _, sub := range []string{NodesDir, SnapshotsDir, ArtifactsDir} {
		if err := secureDir(filepath.Join(opts.DataDir, sub)); err != nil {
			return fmt.Errorf("creating %s: %w", sub, err)
		}
	}
	gpus, err := machineGPUs(ctx, opts)
	if err != nil {
		return err
	}
	if len(gpus) > 0 {
		log.Info("local nodes get this machine's GPUs", "gpus", strings.Join(gpus, ","))
	}
	containers, err := containerRunner(opts)
	if err != nil {
		return err
	}
	opts.Slurm.Containers = containers
	if containers != nil {
		// Image archives are imported into the pods' Kubernetes nodes with the same binary.
		opts.Kubernetes.Importer = containers
	}
	nodes, err := nodeDriver(ctx, opts)
	if err != nil {
		return err
	}
	defer nodes.Close()
	snapshots := snapshot.NewStore(filepath.Join(opts.DataDir, SnapshotsDir))
	arts, err := artifacts.Open(filepath.Join(opts.DataDir, ArtifactsDir))
	if err != nil {
		return err
	}
	nodeAPI, err := nodeAPI(opts, nodes.Name())
	if err != nil {
		return err
	}
	eng, err := engine.New(engine.Config{
		Store: st, Clock: opts.Clock, Logger: opts.Logger, Locations: opts.Locations,
		NodesDriver: nodes.Name(), Version: opts.Version, DataDir: opts.DataDir, ContainerdAddress: opts.ContainerdAddress,
		Driver: nodes, Snapshots: snapshots, Artifacts: arts, MaxOutputSize: opts.MaxOutputSize,
		CapacityVCPUs: opts.CapacityVCPUs, MinIdleShutdown: opts.MinIdleShutdown, GPUs: gpus,
		NewKubeDriver: attachedKubeDriver(opts, containers), KubeImage: opts.Kubernetes.Image, NodeAPI: nodeAPI, Containers: containers,
	})
	if err != nil {
		return err
	}

	scoringLn, err := eng.ListenScoring(opts.ScoringListen)
	if err != nil {
		return err
	}
	// The engine's metrics; the engine reports its node lifecycle to them.
	m := metrics.New(metrics.Options{Source: eng, Clock: opts.Clock})
	eng.SetRecorder(m)
	eng.SetEndpointMetrics(m)
	// The scoring listener takes the event loops: the usual scoring request without a
	// goroutine wake-up, over plain HTTP or TLS, anything else through the lean server and
	// net/http.
	scoring := eng.ScoringServer(m, opts.Logger)
	defer func() {
		// In-flight scoring requests get the same grace as API calls.
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = scoring.Shutdown(shutdownCtx)
		eng.CloseScoring()
	}()
	ln, err := listen(opts)
	if err != nil {
		scoringLn.Close()
		return err
	}
	secured, tlsCfg, tlsOn, err := secureListeners(opts, opts.Logger, opts.Clock, ln, scoringLn)
	if err != nil {
		ln.Close()
		scoringLn.Close()
		return err
	}
	ln = secured[0]
	if tlsOn[1] {
		// The loops run the handshakes on the plain listener themselves.
		ScoringOverTLS(scoring, tlsCfg, opts.Logger)
		eng.ScoringOverTLS()
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	if err := eng.Start(ctx); err != nil {
		ln.Close()
		scoringLn.Close()
		return err
	}
	go func() { _ = scoring.Serve(scoringLn) }()

	tokens, err := auth.OpenTokens(st, opts.Clock)
	if err != nil {
		return err
	}
	audit, err := auth.OpenAudit(filepath.Join(opts.DataDir, auth.AuditFile))
	if err != nil {
		return err
	}
	defer audit.Close()

	var lastCall atomic.Int64
	lastCall.Store(opts.Clock.Now().UnixNano())
	api := server.New(server.Options{
		Engine: eng, Logger: opts.Logger, Token: opts.Token, Tokens: tokens, Audit: audit,
		Snapshots: snapshots, Backup: st.Backup,
		BackupArchive: func(ctx context.Context, w io.Writer) error {
			return eng.Backup(ctx, w, StoreFile, ArtifactsDir, SnapshotsDir)
		},
		OnRequest: func() { lastCall.Store(opts.Clock.Now().UnixNano()) },
		Shutdown:  stop,
		Metrics:   m,
		Clock:     opts.Clock,
	})
	srv := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("engine serving", "listen", ln.Addr().String(), "data_dir", opts.DataDir, "pid", os.Getpid())
	if opts.Ready != nil {
		opts.Ready(ln.Addr().String())
	}

	dataDir, err := os.Open(opts.DataDir)
	if err != nil {
		return err
	}
	defer dataDir.Close()
	dirInfo, err := dataDir.Stat()
	if err != nil {
		return err
	}
	w := watcher{dataDir: opts.DataDir, dirInfo: dirInfo, idleExit: opts.IdleExit, clock: opts.Clock, engine: eng, lastCall: &lastCall}
	reason := w.wait(ctx, served)
	log.Info("engine stopping", "reason", reason)

	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdownCtx)
	if ln.Addr().Network() == "unix" {
		_ = os.Remove(ln.Addr().String())
	}
	return nil
}

// watcher decides when an engine should exit by itself.
type watcher struct {
	dataDir string
	// dirInfo is the data dir as the engine found it at start, which it keeps open so that
	// its inode is not reused: a data dir that was deleted and made again at the same path
	// (a node agent writing into nodes/ while the directory is removed re-creates it) is
	// another directory, and the engine's is gone.
	dirInfo  os.FileInfo
	idleExit time.Duration
	clock    clock.WithTicker
	engine   interface{ HasWork() bool }
	lastCall *atomic.Int64
}

// wait blocks until a reason to stop, which it returns.
func (w watcher) wait(ctx context.Context, served <-chan error) string {
	// A one-second tick bounds how long a deleted data dir keeps an engine alive; the idle
	// rule is measured in minutes, so the same tick serves it.
	ticker := w.clock.NewTicker(time.Second)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return "stop requested"
		case err := <-served:
			return fmt.Sprintf("listener failed: %v", err)
		case <-ticker.C():
			if reason := w.check(); reason != "" {
				return reason
			}
		}
	}
}

// check returns a reason to stop now, or "".
func (w watcher) check() string {
	fi, err := os.Stat(w.dataDir)
	if errors.Is(err, os.ErrNotExist) || err == nil && w.dirInfo != nil && !os.SameFile(fi, w.dirInfo) {
		return "data dir deleted"
	}
	if w.idleExit <= 0 {
		return ""
	}
	idle := w.clock.Since(time.Unix(0, w.lastCall.Load()))
	if idle >= w.idleExit && !w.engine.HasWork() {
		return fmt.Sprintf("idle for %s with nothing to manage", idle.Round(time.Second))
	}
	return ""
}

// acquireLock takes an exclusive, non-blocking flock and writes this process's pid into
// the file. The kernel drops the lock when its holder dies, but not at the instant kill
// returns: an engine killed with SIGKILL a moment ago may still be tearing down. So when the
// lock is taken, acquireLock asks who holds it (the pid in the file): a live engine means
// ErrAlreadyRunning at once; a holder that is exiting, a zombie, gone, or unknown is waited
// for, up to lockWaitDying, before the lock counts as held.
func acquireLock(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening lock file: %w", err)
	}
	deadline := time.Now().Add(lockWaitDying)
	for {
		err := proc.TryLock(f)
		if err == nil {
			break
		}
		if !errors.Is(err, proc.ErrLocked) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		holder := lockHolder(path)
		if (holder > 0 && processRunning(holder)) || !time.Now().Before(deadline) {
			f.Close()
			if holder > 0 {
				return nil, fmt.Errorf("%w (pid %d)", ErrAlreadyRunning, holder)
			}
			return nil, ErrAlreadyRunning
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// lockWaitDying bounds the wait for a lock whose holder is dying or unknown.
const lockWaitDying = 5 * time.Second

// lockHolder returns the pid written in a lock file, or 0.
func lockHolder(path string) int {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// processRunning reports whether pid is a process that is neither a zombie (this machine's
// init may never reap it, so a dead process can stay in the table with state Z) nor
// exiting (PF_EXITING: closing its files, about to drop its locks) nor about to (SIGKILL
// pending: kill has returned but the process has not run since).
func processRunning(pid int) bool {
	state, flags, ok := procStat(pid)
	if !ok || state == "Z" || state == "X" || state == "x" {
		return false
	}
	const pfExiting = 0x4
	if flags&pfExiting != 0 {
		return false
	}
	return !killPending(pid)
}

// procStat reads a process's state letter and flags from /proc/PID/stat; ok is false when
// there is no such process.
func procStat(pid int) (state string, flags uint64, ok bool) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, false
	}
	// The command name (field 2) is in parentheses and may hold anything: parse after it.
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return "", 0, false
	}
	f := strings.Fields(string(raw[i+1:]))
	if len(f) < 7 {
		return "", 0, false
	}
	flags, err = strconv.ParseUint(f[6], 10, 64)
	return f[0], flags, err == nil
}

// WaitExited waits until the process pid on this machine has exited: gone, or a zombie
// (whose files, and so its locks and its store, are closed; this machine's init may never
// reap it), or until ctx ends. A process that is only exiting may still hold its files.
func WaitExited(ctx context.Context, pid int) error {
	for {
		if state, _, ok := procStat(pid); !ok || state == "Z" || state == "X" || state == "x" {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// killPending reports whether SIGKILL is pending for pid (/proc/PID/status SigPnd or
// ShdPnd, hex masks where signal n is bit n-1).
func killPending(pid int) bool {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return true
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok || (name != "SigPnd" && name != "ShdPnd") {
			continue
		}
		mask, err := strconv.ParseUint(strings.TrimSpace(value), 16, 64)
		if err == nil && mask&(1<<(syscall.SIGKILL-1)) != 0 {
			return true
		}
	}
	return false
}

// listen opens the API listener. A unix socket is made 0600 before anyone can connect
// (the umask covers the window between bind and chmod); a TCP listener off loopback
// needs a token.
func listen(opts Options) (net.Listener, error) {
	target := opts.Listen
	if target == "" {
		target = "unix://" + filepath.Join(opts.DataDir, SocketFile)
	}
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("parsing listen address %q: %w", target, err)
	}
	switch u.Scheme {
	case "unix":
		// Only the lock holder reaches here, so a socket file left by a crashed engine is stale.
		_ = os.Remove(u.Path)
		old := proc.Umask(0o177)
		ln, err := net.Listen("unix", u.Path)
		proc.Umask(old)
		if err != nil {
			return nil, fmt.Errorf("listening on %s: %w", u.Path, err)
		}
		if err := os.Chmod(u.Path, 0o600); err != nil {
			ln.Close()
			return nil, fmt.Errorf("securing socket: %w", err)
		}
		return ln, nil
	case "tcp":
		// A TCP port is open to every local user, loopback included.
		if opts.Token == "" {
			return nil, fmt.Errorf("refusing to listen on %s without a token: pass --token-file", u.Host)
		}
		ln, err := net.Listen("tcp", u.Host)
		if err != nil {
			return nil, fmt.Errorf("listening on %s: %w", u.Host, err)
		}
		return ln, nil
	}
	return nil, fmt.Errorf("listen address %q: scheme must be unix or tcp", target)
}

// IsLoopbackHost reports whether host is a loopback name or address.
func IsLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// nodeDriver starts the node driver opts.Nodes names.
func nodeDriver(ctx context.Context, opts Options) (driver.Driver, error) {
	switch opts.Nodes {
	case "", "local":
		cfg := local.Config{
			Dir: filepath.Join(opts.DataDir, NodesDir), AgentArgv: opts.AgentArgv, Clock: opts.Clock, Logger: opts.Logger,
		}
		if opts.ContainerdAddress != "" {
			id, err := engineID(opts.DataDir)
			if err != nil {
				return nil, err
			}
			cfg.ContainerdAddress, cfg.EngineID = opts.ContainerdAddress, id
		}
		d, err := local.New(cfg)
		if err != nil {
			return nil, fmt.Errorf("starting the local node driver: %w", err)
		}
		return d, nil
	case "slurm":
		return remoteDriver(ctx, opts, "slurm", func(ctx context.Context, id string) (*slurm.Driver, error) {
			cfg := opts.Slurm
			cfg.EngineID, cfg.Clock, cfg.Logger = id, opts.Clock, opts.Logger
			if cfg.Login != "" {
				cfg.LoginHostKeyFile = filepath.Join(opts.DataDir, SlurmLoginHostKeyFile)
			}
			return slurm.New(ctx, cfg)
		})
	case "kubernetes":
		return remoteDriver(ctx, opts, "kubernetes", func(ctx context.Context, id string) (*kubernetes.Driver, error) {
			cfg := opts.Kubernetes
			cfg.EngineID, cfg.Clock, cfg.Logger = id, opts.Clock, opts.Logger
			d, err := kubernetes.New(ctx, cfg)
			if err == nil {
				if cerr := d.CheckTasksInImages(ctx); cerr != nil {
					opts.Logger.Warn(cerr.Error())
				}
			}
			return d, err
		})
	}
	return nil, fmt.Errorf("unknown node driver %q: use local, slurm or kubernetes", opts.Nodes)
}

// containerRunner is how the engine runs tasks in container images on machines it reaches
// over SSH or through Slurm: with its own binary (the one its node agents run, as
// container-run), which only a Linux engine can copy to a Linux machine; nil elsewhere.
func containerRunner(opts Options) (*ssh.ContainerRunner, error) {
	if runtime.GOOS != "linux" || len(opts.AgentArgv) == 0 {
		return nil, nil
	}
	id, err := engineID(opts.DataDir)
	if err != nil {
		return nil, err
	}
	argv := opts.AgentArgv
	args := append(slices.Clone(argv[1:len(argv)-1]), nodeagent.ContainerRunCommand)
	return &ssh.ContainerRunner{Binary: argv[0], Args: args, EngineID: id}, nil
}

// remoteDriver starts the driver of a cluster manager (Slurm, Kubernetes): its nodes carry
// this engine's id, so that after a crash the engine finds its own, and it gets 30 s to
// reach the cluster.
func remoteDriver[D driver.Driver](ctx context.Context, opts Options, name string, start func(ctx context.Context, engineID string) (D, error)) (driver.Driver, error) {
	id, err := engineID(opts.DataDir)
	if err != nil {
		return nil, err
	}
	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	d, err := start(startCtx, id)
	if err != nil {
		return nil, fmt.Errorf("starting the %s node driver: %w", name, err)
	}
	return d, nil
}

// attachedKubeDriver builds the node driver of one attached Kubernetes cluster: its pods
// carry this engine's id, so that after a crash the engine finds the pods it made there.
func attachedKubeDriver(opts Options, containers *ssh.ContainerRunner) route.NewKubeDriver {
	return func(ctx context.Context, cfg kubernetes.Config) (driver.Driver, error) {
		id, err := engineID(opts.DataDir)
		if err != nil {
			return nil, err
		}
		cfg.EngineID, cfg.Clock, cfg.Logger = id, opts.Clock, opts.Logger
		if containers != nil {
			// Image archives are imported into the nodes' containerd with the binary
			// that runs images on attached machines.
			cfg.Importer = containers
		}
		return kubernetes.New(ctx, cfg)
	}
}

// engineID reads the data dir's engine id, making one at the first start.
func engineID(dataDir string) (string, error) {
	path := filepath.Join(dataDir, EngineIDFile)
	if raw, err := os.ReadFile(path); err == nil {
		if id := strings.TrimSpace(string(raw)); id != "" {
			return id, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("reading the engine id: %w", err)
	}
	id := slurm.NewEngineID()
	if err := atomicfile.Write(path, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("writing the engine id: %w", err)
	}
	return id, nil
}
