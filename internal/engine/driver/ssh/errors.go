package ssh

import (
	"errors"
	"fmt"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
)

// ErrorKind says why reaching a machine failed.
type ErrorKind int

const (
	// KindUnreachable: no TCP connection could be made (no route, timeout, unknown name).
	KindUnreachable ErrorKind = iota + 1
	// KindConnectionRefused: the host answered but nothing listens on the port.
	KindConnectionRefused
	// KindAuthFailed: the server rejected the username with the password or private key.
	KindAuthFailed
	// KindHostKeyMismatch: the server's host key is not the pinned one.
	KindHostKeyMismatch
	// KindNotLinux: the machine runs something other than Linux.
	KindNotLinux
	// KindInvalidTarget: the Target itself is unusable (no address, bad private key, ...).
	KindInvalidTarget
)

// Error is a failure to reach or accept a machine. It never carries a password or key:
// only the address, the username and fingerprints, which are public.
type Error struct {
	Kind ErrorKind
	// Address is host:port.
	Address string
	// Username is the login name tried (KindAuthFailed).
	Username string
	// Expected and Actual are SHA256 host key fingerprints (KindHostKeyMismatch).
	Expected string
	Actual   string
	// OS is what `uname -s` printed (KindNotLinux).
	OS string
	// Reason is a short explanation (KindInvalidTarget).
	Reason string
	// Err is the underlying error, if any.
	Err error
}

func (e *Error) Error() string {
	var msg string
	switch e.Kind {
	case KindUnreachable:
		msg = fmt.Sprintf("host %s is unreachable; check the address and that the machine is up and reachable from the engine", e.Address)
	case KindConnectionRefused:
		msg = fmt.Sprintf("connection to %s was refused: nothing listens on that port; check ssh_port and that sshd runs on the machine", e.Address)
	case KindAuthFailed:
		msg = fmt.Sprintf("authentication as user %q on %s failed: the server rejected the credentials; check username, password and private_key", e.Username, e.Address)
	case KindHostKeyMismatch:
		msg = fmt.Sprintf("host key of %s does not match: expected %s, got %s; if the machine was reinstalled on purpose, set host_key_fingerprint to the new fingerprint", e.Address, e.Expected, e.Actual)
	case KindNotLinux:
		msg = fmt.Sprintf("host %s runs %q, not Linux; only Linux machines can be attached", e.Address, e.OS)
	case KindInvalidTarget:
		msg = fmt.Sprintf("invalid target %s: %s", e.Address, e.Reason)
	default:
		msg = fmt.Sprintf("ssh to %s failed", e.Address)
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes an Error match the driver's error kinds: a machine that cannot be reached
// (unreachable, refused) is driver.ErrTransient, since machines come back; one that
// rejects the engine (credentials, host key, not Linux) or a target that is unusable is
// driver.ErrPermanent, since it fails until someone changes the machine or the target.
func (e *Error) Is(target error) bool {
	switch target {
	case driver.ErrTransient:
		return e.Kind == KindUnreachable || e.Kind == KindConnectionRefused
	case driver.ErrPermanent:
		switch e.Kind {
		case KindAuthFailed, KindHostKeyMismatch, KindNotLinux, KindInvalidTarget:
			return true
		}
	}
	return false
}

func isKind(err error, k ErrorKind) bool {
	var e *Error
	return errors.As(err, &e) && e.Kind == k
}

// IsUnreachable reports whether err means no TCP connection could be made to the host.
func IsUnreachable(err error) bool { return isKind(err, KindUnreachable) }

// IsConnectionRefused reports whether err means nothing listens on the SSH port.
func IsConnectionRefused(err error) bool { return isKind(err, KindConnectionRefused) }

// IsAuthFailed reports whether err means the credentials were rejected.
func IsAuthFailed(err error) bool { return isKind(err, KindAuthFailed) }

// IsHostKeyMismatch reports whether err means the host key is not the pinned one.
func IsHostKeyMismatch(err error) bool { return isKind(err, KindHostKeyMismatch) }

// IsNotLinux reports whether err means the machine does not run Linux.
func IsNotLinux(err error) bool { return isKind(err, KindNotLinux) }

// IsInvalidTarget reports whether err means the Target itself is unusable.
func IsInvalidTarget(err error) bool { return isKind(err, KindInvalidTarget) }
