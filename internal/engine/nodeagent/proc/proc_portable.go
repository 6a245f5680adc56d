//go:build unix && (!linux || mlcompute_portable)

package proc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The portable layer has no pidfd to sleep on: it asks kill(2) whether a process is
// still there every pollInterval, and ps(1) whether it is a zombie every zombieEvery
// polls. A zombie's exit is thus seen within zombieEvery*pollInterval.
const (
	pollInterval = 20 * time.Millisecond
	zombieEvery  = 10
)

// Proc is a handle on one process, by its pid. Unlike the Linux handle it cannot tell
// the process from a later one that got the same pid.
type Proc struct {
	pid int

	mu     sync.Mutex
	closed bool
}

// Open returns a handle on pid; ErrGone if there is no such process. A zombie is still a
// process here: Exited reports true for it.
func Open(pid int) (*Proc, error) {
	if pid <= 0 || !exists(pid) {
		return nil, fmt.Errorf("opening pid %d: %w", pid, ErrGone)
	}
	return &Proc{pid: pid}, nil
}

// exists reports whether kill(2) finds pid (a zombie counts; EPERM means it exists).
func exists(pid int) bool {
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// Pid is the process id the handle was opened for.
func (p *Proc) Pid() int { return p.pid }

// Signal sends sig to the process. Signalling a process that has exited returns nil.
func (p *Proc) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("signalling a closed process handle")
	}
	err := syscall.Kill(p.pid, sig)
	if err == nil || errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return fmt.Errorf("signalling pid %d: %w", p.pid, err)
}

// Exited reports whether the process has exited (a zombie has).
func (p *Proc) Exited() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed || !Alive(p.pid)
}

// Wait blocks until the process exits (nil) or ctx ends (ctx.Err()). Close must not run
// concurrently.
func (p *Proc) Wait(ctx context.Context) error {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return errors.New("waiting on a closed process handle")
	}
	return waitGone(ctx, p.pid)
}

// waitGone polls until pid is gone or a zombie, or ctx ends.
func waitGone(ctx context.Context, pid int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for n := 0; ; n++ {
		if !exists(pid) || (n%zombieEvery == 0 && !Alive(pid)) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// Close releases the handle. It is safe to call twice.
func (p *Proc) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	return nil
}

// ps runs ps(1) with args in the C locale and returns its output; a ps that finds no
// process exits 1 with no output, which is no error here.
func ps(args ...string) ([]byte, error) {
	cmd := exec.Command("ps", args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	out, err := cmd.Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(bytes.TrimSpace(out)) == 0 {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("running ps: %w", err)
	}
	return out, nil
}

// ReadStat asks ps(1) about pid; ErrGone when the process does not exist.
func ReadStat(pid int) (Stat, error) {
	out, err := ps("-o", "pid=,pgid=,stat=,lstart=", "-p", strconv.Itoa(pid))
	if err != nil {
		return Stat{}, fmt.Errorf("reading stat of %d: %w", pid, err)
	}
	f := strings.Fields(string(out))
	if len(f) == 0 {
		return Stat{}, fmt.Errorf("reading stat of %d: %w", pid, ErrGone)
	}
	if len(f) < 3 || f[0] != strconv.Itoa(pid) {
		return Stat{}, fmt.Errorf("parsing stat of %d: unexpected ps output %q", pid, out)
	}
	pgid, err := strconv.Atoi(f[1])
	if err != nil {
		return Stat{}, fmt.Errorf("parsing stat of %d: %w", pid, err)
	}
	st := Stat{Pid: pid, State: f[2][0], Pgid: pgid}
	if t, err := time.Parse("Mon Jan _2 15:04:05 2006", strings.Join(f[3:], " ")); err == nil {
		st.Start = uint64(t.Unix())
	}
	return st, nil
}

// FindByEnv returns the live processes whose environment holds the exact entry
// "name=value", as ps(1) shows environments (a value holding a space is not found).
// Processes whose environment cannot be read (other users') are skipped.
func FindByEnv(name, value string) ([]Stat, error) {
	args := []string{"-A", "-ww", "e", "-o", "pid=,pgid=,stat=,args="} // procps
	if runtime.GOOS != "linux" {
		args = []string{"-A", "-ww", "-E", "-o", "pid=,pgid=,stat=,command="} // BSD
	}
	out, err := ps(args...)
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	want := name + "=" + value
	self := os.Getpid()
	var found []Stat
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !slices.Contains(f[3:], want) {
			continue
		}
		pid, err1 := strconv.Atoi(f[0])
		pgid, err2 := strconv.Atoi(f[1])
		if err1 != nil || err2 != nil || pid == self || f[2][0] == 'Z' || f[2][0] == 'X' {
			continue
		}
		found = append(found, Stat{Pid: pid, State: f[2][0], Pgid: pgid})
	}
	return found, sc.Err()
}

// Cmdline returns the argv of pid as ps(1) shows it, split at spaces.
func Cmdline(pid int) ([]string, error) {
	out, err := ps("-ww", "-o", "args=", "-p", strconv.Itoa(pid))
	if err != nil {
		return nil, fmt.Errorf("reading cmdline of %d: %w", pid, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("reading cmdline of %d: %w", pid, ErrGone)
	}
	return strings.Fields(string(out)), nil
}

// WaitExited blocks until the child pid has exited, without reaping it: it polls until
// the child is a zombie.
func WaitExited(pid int) error {
	return waitGone(context.Background(), pid)
}

// Cwd returns the working directory of pid: from /proc where there is one, else from
// lsof(8) (macOS).
func Cwd(pid int) (string, error) {
	if dir, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd"); err == nil {
		return dir, nil
	}
	out, err := exec.Command("lsof", "-a", "-p", strconv.Itoa(pid), "-d", "cwd", "-Fn").Output()
	if err != nil {
		return "", fmt.Errorf("reading cwd of %d: %w", pid, err)
	}
	for line := range strings.SplitSeq(string(out), "\n") {
		if strings.HasPrefix(line, "n") {
			return line[1:], nil
		}
	}
	return "", fmt.Errorf("reading cwd of %d: %w", pid, ErrGone)
}

// watchInterval is how often the portable directory watches look.
const watchInterval = 50 * time.Millisecond

// WatchRemoved returns a channel closed when dir is deleted, and a stop function. It looks
// every watchInterval.
func WatchRemoved(dir string) (<-chan struct{}, func(), error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, nil, fmt.Errorf("watching %s: %w", dir, err)
	}
	removed := make(chan struct{})
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(watchInterval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
				close(removed)
				return
			}
		}
	}()
	var once sync.Once
	return removed, func() { once.Do(func() { close(done) }) }, nil
}

// WatchChanges looks at dir every watchInterval. The channel receives after a file in it
// changed size, time or name (coalesced) and is closed once dir is removed or ctx ends.
// An error wrapping fs.ErrNotExist if dir does not exist.
func WatchChanges(ctx context.Context, dir string) (<-chan struct{}, error) {
	last, err := dirState(dir)
	if err != nil {
		return nil, fmt.Errorf("watching %s: %w", dir, err)
	}
	changed := make(chan struct{}, 1)
	go func() {
		defer close(changed)
		tick := time.NewTicker(watchInterval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			now, err := dirState(dir)
			if err != nil {
				return
			}
			if now != last {
				last = now
				select {
				case changed <- struct{}{}:
				default: // a wake-up is pending already
				}
			}
		}
	}()
	return changed, nil
}

// dirState sums up the names, sizes and modification times of dir's entries.
func dirState(dir string) (string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, e := range ents {
		info, err := e.Info()
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "%s %d %d\n", e.Name(), info.Size(), info.ModTime().UnixNano())
	}
	return b.String(), nil
}

// sunPathMax is the longest socket path this layer lets bind(2) and connect(2) take: 103
// bytes (macOS's sockaddr_un holds 104 with the NUL).
const sunPathMax = 103

// WithSocketPath calls f with a path naming sock that fits in a sockaddr_un: sock itself
// when short enough, else <private temp dir>/d/<base>, where d is a symbolic link to
// sock's directory that lives while f runs (there is no /proc/self/fd to go through). The
// temporary directory is made 0700, so no one else can swap the link.
func WithSocketPath(sock string, f func(path string) error) error {
	if len(sock) <= sunPathMax {
		return f(sock)
	}
	tmp, err := os.MkdirTemp("", "mlc")
	if err != nil {
		return fmt.Errorf("making a short path for socket %s: %w", sock, err)
	}
	defer os.RemoveAll(tmp)
	link := filepath.Join(tmp, "d")
	if err := os.Symlink(filepath.Dir(sock), link); err != nil {
		return fmt.Errorf("making a short path for socket %s: %w", sock, err)
	}
	short := filepath.Join(link, filepath.Base(sock))
	if len(short) > sunPathMax {
		return fmt.Errorf("socket name %s is too long", filepath.Base(sock))
	}
	return f(short)
}
