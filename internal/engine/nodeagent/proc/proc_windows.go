//go:build windows

package proc

import (
	"context"
	"os"
	"syscall"
)

// Windows runs no local process of the engine's: each call fails with ErrUnsupported, and
// the calls that cannot fail do nothing.

// Proc is a handle on one process; none can be opened on Windows.
type Proc struct{ pid int }

// Open fails with ErrUnsupported.
func Open(pid int) (*Proc, error) { return nil, ErrUnsupported }

// Pid is the process id the handle was opened for.
func (p *Proc) Pid() int { return p.pid }

// Signal fails with ErrUnsupported.
func (p *Proc) Signal(syscall.Signal) error { return ErrUnsupported }

// Exited reports true: there is no process to watch.
func (p *Proc) Exited() bool { return true }

// Wait fails with ErrUnsupported.
func (p *Proc) Wait(context.Context) error { return ErrUnsupported }

// Close does nothing.
func (p *Proc) Close() error { return nil }

// ReadStat fails with ErrUnsupported.
func ReadStat(int) (Stat, error) { return Stat{}, ErrUnsupported }

// FindByEnv fails with ErrUnsupported.
func FindByEnv(string, string) ([]Stat, error) { return nil, ErrUnsupported }

// Cmdline fails with ErrUnsupported.
func Cmdline(int) ([]string, error) { return nil, ErrUnsupported }

// KillGroup fails with ErrUnsupported.
func KillGroup(int, syscall.Signal) error { return ErrUnsupported }

// GroupAttr is empty: Windows has no process groups of this kind.
func GroupAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }

// SessionAttr is empty.
func SessionAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }

// TryLock fails with ErrUnsupported.
func TryLock(*os.File) error { return ErrUnsupported }

// Unlock does nothing.
func Unlock(*os.File) error { return nil }

// Umask does nothing and returns 0.
func Umask(int) int { return 0 }

// CloseOnExec does nothing: Windows handles are not inherited unless asked for.
func CloseOnExec(int) {}

// RedirectFD fails with ErrUnsupported.
func RedirectFD(*os.File, int) error { return ErrUnsupported }

// WaitExited fails with ErrUnsupported.
func WaitExited(int) error { return ErrUnsupported }

// Cwd fails with ErrUnsupported.
func Cwd(int) (string, error) { return "", ErrUnsupported }

// WatchRemoved fails with ErrUnsupported.
func WatchRemoved(string) (<-chan struct{}, func(), error) { return nil, nil, ErrUnsupported }

// WatchChanges fails with ErrUnsupported.
func WatchChanges(context.Context, string) (<-chan struct{}, error) { return nil, ErrUnsupported }

// WithSocketPath calls f with sock.
func WithSocketPath(sock string, f func(path string) error) error { return f(sock) }
