package nodeagent

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/nodeagent/proc"
)

// Spawned is an agent process started by Spawn.
type Spawned struct {
	Cmd *exec.Cmd
	// Ready receives nil once the agent serves its socket, or an error if it exited (or
	// closed its end) first. It receives exactly once.
	Ready <-chan error
	// Done is closed once the agent has exited and been reaped; Err then tells how.
	Done <-chan struct{}

	err error
}

// Err is the agent's exit status (from Wait); valid once Done is closed.
func (s *Spawned) Err() error {
	<-s.Done
	return s.err
}

// Spawn starts argv with "--dir nodeDir" appended as a detached agent: its own session
// (so a terminal's signals never reach it), working directory nodeDir, stdin /dev/null,
// stdout and stderr appended to nodeDir/agent.log. It returns once the process exists;
// the agent reports on Ready when it serves, through a pipe, so nobody polls for it.
func Spawn(argv []string, nodeDir string) (*Spawned, error) {
	return spawn(argv, nodeDir, nodeDir, nil)
}

// Standby is an agent process started ahead of need, before its node exists: starting a
// Go process costs milliseconds that a node coming up from zero should not wait for. It
// waits for Assign and serves nothing until then.
type Standby struct {
	*Spawned
	assign *os.File
}

// SpawnStandby starts argv as Spawn does, with "--dir <nodesDir>/.standby" (padded with
// the room the agent writes its node's directory into, cmdline.go) and its output in
// <nodesDir>/.standby/agent.log until it is assigned a node. It exits when Cancel is
// called or this process dies (its end of the assignment pipe closes).
func SpawnStandby(argv []string, nodesDir string) (*Standby, error) {
	dir := filepath.Join(nodesDir, StandbyDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating standby dir: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("creating assignment pipe: %w", err)
	}
	sp, err := spawn(argv, dir, standbyArgDir(dir), r)
	r.Close()
	if err != nil {
		w.Close()
		return nil, err
	}
	return &Standby{Spawned: sp, assign: w}, nil
}

// Assign gives the standby agent its node directory (created, with node.json written);
// the agent then runs as if Spawn had started it there and reports on Ready. An error
// means the standby agent is gone: start the node with Spawn.
func (s *Standby) Assign(nodeDir string) error {
	defer s.assign.Close()
	select {
	case <-s.Done:
		return errors.New("the standby node agent has exited")
	default:
	}
	if _, err := s.assign.WriteString(nodeDir + "\n"); err != nil {
		return fmt.Errorf("assigning the standby node agent: %w", err)
	}
	return nil
}

// Cancel makes an unassigned standby agent exit (it reads EOF); Done closes once it has.
func (s *Standby) Cancel() {
	s.assign.Close()
}

// spawn starts an agent for nodeDir, with argDir as its --dir argument; with assign, a
// standby agent that reads its real node directory from assign (fd 4).
func spawn(argv []string, nodeDir, argDir string, assign *os.File) (*Spawned, error) {
	if len(argv) == 0 {
		return nil, errors.New("spawning node agent: empty command")
	}
	logFile, err := os.OpenFile(filepath.Join(nodeDir, LogFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening agent log: %w", err)
	}
	defer logFile.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("creating ready pipe: %w", err)
	}
	args := append(append([]string(nil), argv...), "--dir", argDir)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = nodeDir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.ExtraFiles = []*os.File{w} // fd 3 in the agent
	cmd.Env = append(agentEnv(), ReadyFDEnv+"=3")
	if assign != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, assign) // fd 4
		cmd.Env = append(cmd.Env, AssignFDEnv+"=4")
	}
	cmd.SysProcAttr = proc.SessionAttr()
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("starting node agent %s: %w", args[0], err)
	}
	w.Close()
	ready := make(chan error, 1)
	go func() {
		defer r.Close()
		line, err := bufio.NewReader(r).ReadString('\n')
		if strings.TrimSpace(line) == "ready" {
			ready <- nil
			return
		}
		if err == nil {
			err = fmt.Errorf("unexpected %q", line)
		}
		ready <- fmt.Errorf("node agent pid %d exited before serving (%v); see %s", cmd.Process.Pid, err, filepath.Join(nodeDir, LogFile))
	}()
	done := make(chan struct{})
	sp := &Spawned{Cmd: cmd, Ready: ready, Done: done}
	go func() {
		sp.err = cmd.Wait()
		close(done)
	}()
	return sp, nil
}

// agentEnv is this process's environment without the variables an agent must not inherit.
func agentEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case ReadyFDEnv, AssignFDEnv, "MLCOMPUTE_TOKEN", TaskMarkerEnv:
			continue
		}
		env = append(env, kv)
	}
	return env
}

// agentArgvMatches reports whether cmdline is an agent serving nodeDir: its arguments
// contain "--dir nodeDir" (or "--dir=nodeDir"), the value without a standby's padding.
func agentArgvMatches(cmdline []string, nodeDir string) bool {
	for i, a := range cmdline {
		if strings.TrimRight(a, " ") == "--dir="+nodeDir ||
			(a == "--dir" && i+1 < len(cmdline) && strings.TrimRight(cmdline[i+1], " ") == nodeDir) {
			return true
		}
	}
	return false
}

// IsAgentFor reports whether pid is a node agent serving nodeDir, judged by its command
// line in /proc, or for an agent that was started on standby, by its command line naming
// the standby dir beside nodeDir and its working directory being nodeDir (an assigned
// agent moves there before it takes the node's lock, and names nodeDir in its command
// line soon after).
func IsAgentFor(pid int, nodeDir string) bool {
	cmdline, err := proc.Cmdline(pid)
	if err != nil {
		return false
	}
	if agentArgvMatches(cmdline, nodeDir) {
		return true
	}
	if !agentArgvMatches(cmdline, filepath.Join(filepath.Dir(nodeDir), StandbyDir)) {
		return false
	}
	cwd, err := proc.Cwd(pid)
	return err == nil && cwd == nodeDir
}
