// Package proc is the engine's process layer: it watches and signals processes, finds them
// by an environment marker (how node agents and the local driver find a task's processes
// after an agent died), kills process groups, takes file locks and watches directories.
// One set of functions has two implementations:
//
//   - Linux (proc_linux.go, sys_linux.go): pidfds, so a process's exit is learned the
//     moment it happens and a signal can never reach a process that reused a dead one's
//     pid; an eventfd wakes a waiter; /proc; inotify; waitid(WNOWAIT).
//   - portable (proc_portable.go, sys_portable.go): what macOS runs, on kill(2), ps(1),
//     flock(2) and polling. The build tag mlcompute_portable forces it on Linux, so the
//     engine's tests exercise the code macOS runs.
//
// Windows builds (proc_windows.go) compile, and every call that would run or watch a local
// process returns ErrUnsupported: Windows works against a remote engine only.
package proc

import (
	"context"
	"errors"
	"fmt"
	"syscall"
)

// ErrGone is returned by Open when the process does not exist.
var ErrGone = errors.New("process does not exist")

// ErrUnsupported is returned on an operating system with no local processes (Windows).
var ErrUnsupported = errors.New("local processes are not supported on this operating system; use an engine on Linux or macOS through the provider's endpoint")

// ErrLocked is returned by TryLock when another process holds the lock.
var ErrLocked = errors.New("locked by another process")

// Stat is what the system says about a process.
type Stat struct {
	Pid   int
	State byte // R, S, D, Z, ...
	Pgid  int
	// Start is the process's start time (Linux: clock ticks since boot; portable: seconds
	// since the epoch): with the pid, it tells a process from a later one that got the
	// same pid. Only equality is meaningful.
	Start uint64
}

// Alive reports whether pid names a process that has not exited (zombies are not alive).
func Alive(pid int) bool {
	st, err := ReadStat(pid)
	return err == nil && st.State != 'Z' && st.State != 'X'
}

// KillByEnv SIGKILLs every process whose environment holds "name=value", together with
// their whole process groups, and returns once they have all exited (or ctx ends). It
// reports how many processes it found. Processes forked while it runs are found by a
// second scan.
func KillByEnv(ctx context.Context, name, value string) (int, error) {
	found := 0
	for round := 0; round < 5; round++ {
		procs, err := FindByEnv(name, value)
		if err != nil {
			return found, err
		}
		if len(procs) == 0 {
			return found, nil
		}
		found += len(procs)
		var handles []*Proc
		groups := map[int]bool{}
		for _, st := range procs {
			if h, err := Open(st.Pid); err == nil {
				handles = append(handles, h)
			}
			if st.Pgid > 1 && !groups[st.Pgid] {
				groups[st.Pgid] = true
				_ = KillGroup(st.Pgid, syscall.SIGKILL)
			}
		}
		for _, h := range handles {
			_ = h.Signal(syscall.SIGKILL)
		}
		var werr error
		for _, h := range handles {
			if werr == nil {
				werr = h.Wait(ctx)
			}
			h.Close()
		}
		if werr != nil {
			return found, fmt.Errorf("waiting for killed processes: %w", werr)
		}
	}
	return found, errors.New("processes kept appearing while being killed")
}
