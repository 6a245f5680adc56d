//go:build unix

package proc

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// KillGroup sends sig to every process of process group pgid. A group that no longer
// exists is no error.
func KillGroup(pgid int, sig syscall.Signal) error {
	if pgid <= 1 {
		return fmt.Errorf("signalling process group %d: not a group", pgid)
	}
	if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signalling process group %d: %w", pgid, err)
	}
	return nil
}

// GroupAttr starts a command as the leader of a new process group, so KillGroup reaches
// it and everything it starts.
func GroupAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// SessionAttr starts a command in a new session, detached from this one's terminal and
// signals.
func SessionAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }

// TryLock takes an exclusive flock(2) of f without waiting: ErrLocked when another open
// file holds it. The lock goes with the holder's death or Unlock.
func TryLock(f *os.File) error {
	err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) || errors.Is(err, unix.EINTR) {
		return ErrLocked
	}
	if err != nil {
		return fmt.Errorf("locking %s: %w", f.Name(), err)
	}
	return nil
}

// Unlock releases a lock TryLock took.
func Unlock(f *os.File) error { return unix.Flock(int(f.Fd()), unix.LOCK_UN) }

// Umask sets the process's file mode creation mask and returns the old one.
func Umask(mask int) int { return unix.Umask(mask) }

// CloseOnExec marks fd so that commands this process starts do not inherit it.
func CloseOnExec(fd int) { unix.CloseOnExec(fd) }
