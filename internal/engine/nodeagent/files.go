package nodeagent

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/atomicfile"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/nodeagent/proc"
)

// writeFileAtomic writes a file durably and atomically (atomicfile.Write).
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	return atomicfile.Write(path, data, perm)
}

// writeLiveInt records a number that describes a live process (the agent's pid, a task's
// process group): atomically, but without fsync, since after a power loss the process is
// gone too and the number means nothing. This keeps an fsync off a node's start.
func writeLiveInt(path string, v int) error {
	return atomicfile.WriteLive(path, []byte(strconv.Itoa(v)+"\n"), 0o600)
}

// WriteLiveFile writes a file that describes live processes (a local node's node.json:
// its agent and tasks) atomically but without fsync, as writeLiveInt does: the node's
// processes do not survive a power loss either, and the engine's own store, which is
// synced, still names the node, so the node is released (its directory removed) whatever
// the file then holds. This keeps an fsync off a node's start.
func WriteLiveFile(path string, data []byte, perm os.FileMode) error {
	return atomicfile.WriteLive(path, data, perm)
}

func writeInt(path string, v int) error {
	return writeFileAtomic(path, []byte(strconv.Itoa(v)+"\n"), 0o600)
}

// readInt reads a file holding one decimal integer.
func readInt(path string) (int, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return 0, fmt.Errorf("parsing %s: %w", path, err)
	}
	return v, nil
}

// ReadPid returns the pid recorded in a node directory's agent.pid.
func ReadPid(nodeDir string) (int, error) {
	return readInt(filepath.Join(nodeDir, PidFile))
}

// listenUnix listens on sock with mode 0600, replacing a stale socket file.
func listenUnix(sock string) (net.Listener, error) {
	if err := os.Remove(sock); err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("removing stale socket: %w", err)
	}
	var ln net.Listener
	err := proc.WithSocketPath(sock, func(path string) error {
		old := proc.Umask(0o177)
		defer proc.Umask(old)
		var err error
		ln, err = net.Listen("unix", path)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", sock, err)
	}
	// The listener unlinks by the name it was given, which for a long path is a
	// /proc/self/fd name that no longer resolves; the agent removes sock itself.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	if err := os.Chmod(sock, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("setting socket mode: %w", err)
	}
	return ln, nil
}
