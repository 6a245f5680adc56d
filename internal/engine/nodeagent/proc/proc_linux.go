//go:build linux && !mlcompute_portable

package proc

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Proc is a handle on one process, held through a pidfd.
type Proc struct {
	pid int

	mu sync.Mutex
	fd int // -1 once closed
}

// Open returns a handle on pid; ErrGone if there is no such process. A zombie is still a
// process here: Exited reports true for it.
func Open(pid int) (*Proc, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("opening pid %d: %w", pid, ErrGone)
	}
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if errors.Is(err, unix.EINVAL) {
		// Kernels before 5.10 do not know PIDFD_NONBLOCK.
		fd, err = unix.PidfdOpen(pid, 0)
	}
	if errors.Is(err, unix.ESRCH) {
		return nil, fmt.Errorf("opening pid %d: %w", pid, ErrGone)
	}
	if err != nil {
		return nil, fmt.Errorf("opening pidfd of %d: %w", pid, err)
	}
	unix.CloseOnExec(fd)
	return &Proc{pid: pid, fd: fd}, nil
}

// Pid is the process id the handle was opened for.
func (p *Proc) Pid() int { return p.pid }

// Signal sends sig to the process. Signalling a process that has exited returns nil.
func (p *Proc) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fd < 0 {
		return errors.New("signalling a closed process handle")
	}
	err := unix.PidfdSendSignal(p.fd, sig, nil, 0)
	if err == nil || errors.Is(err, unix.ESRCH) {
		return nil
	}
	return fmt.Errorf("signalling pid %d: %w", p.pid, err)
}

// Exited reports whether the process has exited (a zombie has).
func (p *Proc) Exited() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fd < 0 {
		return true
	}
	fds := []unix.PollFd{{Fd: int32(p.fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return err == nil && n > 0 && fds[0].Revents != 0
	}
}

// Wait blocks until the process exits (nil) or ctx ends (ctx.Err()). It sleeps in poll(2)
// on the pidfd and an eventfd that ctx's cancellation writes to, so it costs nothing while
// it waits and returns the moment either happens. Close must not run concurrently.
func (p *Proc) Wait(ctx context.Context) error {
	p.mu.Lock()
	fd := p.fd
	p.mu.Unlock()
	if fd < 0 {
		return errors.New("waiting on a closed process handle")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return fmt.Errorf("creating eventfd: %w", err)
	}
	wrote := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(wrote)
		var one [8]byte
		binary.NativeEndian.PutUint64(one[:], 1)
		_, _ = unix.Write(efd, one[:])
	})
	defer func() {
		if !stop() {
			<-wrote
		}
		unix.Close(efd)
	}()
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(efd), Events: unix.POLLIN}}
	for {
		_, err := unix.Poll(fds, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("polling pidfd of %d: %w", p.pid, err)
		}
		if fds[0].Revents != 0 {
			return nil
		}
		if fds[1].Revents != 0 {
			return ctx.Err()
		}
	}
}

// Close releases the pidfd. It is safe to call twice.
func (p *Proc) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fd < 0 {
		return nil
	}
	err := unix.Close(p.fd)
	p.fd = -1
	return err
}

// ReadStat parses /proc/<pid>/stat; ErrGone when the process does not exist.
func ReadStat(pid int) (Stat, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ESRCH) {
		return Stat{}, fmt.Errorf("reading stat of %d: %w", pid, ErrGone)
	}
	if err != nil {
		return Stat{}, fmt.Errorf("reading stat of %d: %w", pid, err)
	}
	// The command name (field 2) is in parentheses and may contain anything, so parse
	// from the last ')'.
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return Stat{}, fmt.Errorf("parsing stat of %d: no command name", pid)
	}
	f := strings.Fields(string(raw[i+1:]))
	if len(f) < 3 || len(f[0]) != 1 {
		return Stat{}, fmt.Errorf("parsing stat of %d: too few fields", pid)
	}
	pgid, err := strconv.Atoi(f[2])
	if err != nil {
		return Stat{}, fmt.Errorf("parsing stat of %d: %w", pid, err)
	}
	st := Stat{Pid: pid, State: f[0][0], Pgid: pgid}
	if len(f) > 19 {
		if st.Start, err = strconv.ParseUint(f[19], 10, 64); err != nil {
			return Stat{}, fmt.Errorf("parsing stat of %d: %w", pid, err)
		}
	}
	return st, nil
}

// FindByEnv returns the live processes whose environment holds the exact entry
// "name=value". Processes whose environment cannot be read (other users') are skipped.
func FindByEnv(name, value string) ([]Stat, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing /proc: %w", err)
	}
	want := []byte(name + "=" + value)
	self := os.Getpid()
	var out []Stat
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !hasEntry(env, want) {
			continue
		}
		st, err := ReadStat(pid)
		if err != nil || st.State == 'Z' || st.State == 'X' {
			continue
		}
		out = append(out, st)
	}
	return out, nil
}

func hasEntry(environ, entry []byte) bool {
	for len(environ) > 0 {
		i := bytes.IndexByte(environ, 0)
		if i < 0 {
			i = len(environ)
		}
		if bytes.Equal(environ[:i], entry) {
			return true
		}
		if i == len(environ) {
			break
		}
		environ = environ[i+1:]
	}
	return false
}

// Cmdline returns the argv of pid as /proc shows it.
func Cmdline(pid int) ([]string, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return nil, fmt.Errorf("reading cmdline of %d: %w", pid, err)
	}
	raw = bytes.TrimRight(raw, "\x00") // an agent that rewrote its line pads it with NULs
	if len(raw) == 0 {
		return nil, nil
	}
	return strings.Split(string(raw), "\x00"), nil
}
