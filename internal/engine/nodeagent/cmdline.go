package nodeagent

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// A standby agent (SpawnStandby) is started before its node exists, so its command line
// says "--dir <nodes>/.standby". Operators and scripts match agents to nodes by that line
// (ps, pgrep -f), so once a standby agent is given its node it writes the node's directory
// into its own command line, in place: the kernel serves /proc/PID/cmdline (what ps shows)
// from the process's argument memory, which the process may write through /proc/self/mem.
// The room for the node's directory is reserved at spawn time: the standby's --dir value is
// padded with spaces (standbyRoom) that the agent never reads as a path. Re-executing the
// agent with the node's argv would be the other way, but it costs a process start (the
// binary's exec and runtime initialisation, tens of milliseconds on a busy machine), which
// is what the standby agent exists to save; the rewrite costs a few system calls.

// standbyRoom is how many bytes a standby agent's --dir value is padded with: enough for
// any node directory name (at most NAME_MAX, 255 bytes) in place of ".standby".
const standbyRoom = 255 - len(StandbyDir)

// standbyArgDir is the --dir value a standby agent waiting in dir is started with.
func standbyArgDir(dir string) string { return dir + strings.Repeat(" ", standbyRoom) }

// nameNodeInCommandLine rewrites this process's command line so that its --dir argument
// names dir. It fails, changing nothing, when the new line does not fit the old one's
// memory or the line has no --dir argument.
func nameNodeInCommandLine(dir string) error {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return fmt.Errorf("reading own stat: %w", err)
	}
	start, end, err := argRange(stat)
	if err != nil {
		return err
	}
	mem, err := os.OpenFile("/proc/self/mem", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("opening own memory: %w", err)
	}
	defer mem.Close()
	old := make([]byte, end-start)
	if _, err := mem.ReadAt(old, start); err != nil {
		return fmt.Errorf("reading own command line: %w", err)
	}
	line, err := withDir(old, dir)
	if err != nil {
		return err
	}
	// os.Args shares this memory: give it copies before it changes under them.
	args := make([]string, len(os.Args))
	for i, a := range os.Args {
		args[i] = strings.Clone(a)
	}
	os.Args = args
	if _, err := mem.WriteAt(line, start); err != nil {
		return fmt.Errorf("writing own command line: %w", err)
	}
	return nil
}

// argRange returns the start and end of the argument memory from /proc/self/stat: fields
// 48 and 49 (proc(5)), counted after the command name, which may hold spaces.
func argRange(stat []byte) (start, end int64, err error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("parsing own stat: no command name")
	}
	fields := strings.Fields(string(stat[i+1:])) // fields[0] is field 3 (state)
	if len(fields) < 47 {
		return 0, 0, fmt.Errorf("parsing own stat: %d fields", len(fields)+2)
	}
	start, err1 := strconv.ParseInt(fields[45], 10, 64)
	end, err2 := strconv.ParseInt(fields[46], 10, 64)
	if err1 != nil || err2 != nil || start <= 0 || end <= start {
		return 0, 0, fmt.Errorf("parsing own stat: argument range %q %q", fields[45], fields[46])
	}
	return start, end, nil
}

// withDir returns the argument memory old (NUL-terminated arguments) with the value of
// its --dir argument replaced by dir, padded with NULs to old's length.
func withDir(old []byte, dir string) ([]byte, error) {
	args := strings.Split(strings.TrimRight(string(old), "\x00"), "\x00")
	found := false
	for i, a := range args {
		switch {
		case a == "--dir" && i+1 < len(args):
			args[i+1], found = dir, true
		case strings.HasPrefix(a, "--dir="):
			args[i], found = "--dir="+dir, true
		}
		if found {
			break
		}
	}
	if !found {
		return nil, fmt.Errorf("rewriting own command line: no --dir argument")
	}
	line := []byte(strings.Join(args, "\x00") + "\x00")
	if len(line) > len(old) {
		return nil, fmt.Errorf("rewriting own command line: %d bytes do not fit in %d", len(line), len(old))
	}
	return append(line, make([]byte, len(old)-len(line))...), nil
}
