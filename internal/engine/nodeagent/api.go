package nodeagent

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Files of a node directory. The local driver writes NodeFile; everything else belongs to
// the agent.
const (
	NodeFile   = "node.json"  // written by the driver before the agent starts
	LockFile   = "agent.lock" // flock held by the live agent
	PidFile    = "agent.pid"
	SocketFile = "agent.sock" // the agent's HTTP API, mode 0600
	LogFile    = "agent.log"  // the agent's own stdout and stderr
	TasksDir   = "tasks"
)

// NodeEnv is the part of NodeFile the agent reads: variables set in every task of the node,
// over the task's own (a local node's GPUs: CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES).
type NodeEnv struct {
	Env map[string]string `json:"env,omitempty"`
}

// Files of a task directory, <node dir>/tasks/<task dir name>/.
const (
	TaskFile     = "task.json"  // key, command and start time (never the environment)
	WorkDir      = "work"       // the task's working directory and HOME
	OutputFile   = "output.log" // stdout and stderr, appended
	PgidFile     = "pgid"       // written once the process started
	ExitCodeFile = "exit_code"  // written atomically once the process ended
)

// TaskMarkerEnv is set in every task's environment to the task's directory. It lets an
// agent (or the driver) find a task's processes after the agent that started them died.
const TaskMarkerEnv = "MLCOMPUTE_TASK_DIR"

// ReadyFDEnv names the file descriptor a starting agent writes one line to once it serves
// its socket, so the process that started it needs no polling to know it is up.
const ReadyFDEnv = "MLCOMPUTE_AGENT_READY_FD"

// AssignFDEnv names the file descriptor a standby agent (SpawnStandby) reads its node
// directory from, one line, before it starts serving it; EOF there makes it exit.
const AssignFDEnv = "MLCOMPUTE_AGENT_ASSIGN_FD"

// StandbyDir is the --dir a standby agent is started with (inside the nodes directory):
// it names no node, only where standby agents wait for one.
const StandbyDir = ".standby"

// KilledExitCode is what a task killed with SIGKILL (by KillTask, by a stopping agent, or
// with its agent) records: 128 + 9, as shells report it.
const KilledExitCode = 137

// ErrAgentRunning is returned when another agent holds the node directory's lock.
var ErrAgentRunning = errors.New("a node agent is already running in this directory")

// TaskRequest asks the agent to start a task.
type TaskRequest struct {
	Key     string            `json:"key"`
	Command []string          `json:"command"`
	Env     map[string]string `json:"env,omitempty"`
	// CodeDir is copied into the task's working directory before the command starts.
	CodeDir string `json:"code_dir,omitempty"`
	// Inputs are copied into the task's working directory after CodeDir.
	Inputs []TaskInput `json:"inputs,omitempty"`
	// Outputs are created empty (a file output's parent) before the command starts.
	Outputs []TaskOutput `json:"outputs,omitempty"`
	// Container, when set, runs Command in its image (ContainerRunCommand).
	Container *TaskContainer `json:"container,omitempty"`
}

// TaskInput is a directory (absolute) copied to Dest, relative to the working directory.
type TaskInput struct {
	Src  string `json:"src"`
	Dest string `json:"dest"`
}

// TaskOutput is a path the task writes, relative to its working directory; File says it
// is one file, whose parent alone is created.
type TaskOutput struct {
	Path string `json:"path"`
	File bool   `json:"file,omitempty"`
}

// TaskState is a task as the agent knows it.
type TaskState struct {
	Key       string     `json:"key"`
	Running   bool       `json:"running"`
	ExitCode  int        `json:"exit_code"` // valid when !Running
	Pid       int        `json:"pid,omitempty"`
	Pgid      int        `json:"pgid,omitempty"`
	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
}

// Info describes a running agent.
type Info struct {
	Pid       int         `json:"pid"`
	Dir       string      `json:"dir"`
	StartedAt time.Time   `json:"started_at"`
	Tasks     []TaskState `json:"tasks"`
}

// ErrorBody is the body of every non-2xx answer.
type ErrorBody struct {
	// Code is stable: not_found, invalid, conflict, shutting_down, internal.
	Code    string `json:"code"`
	Message string `json:"message"`
}

const maxKeyLen = 200

// DirName maps a node or task key to a single safe path element: letters, digits, '-',
// '_' and '.' stay, every other byte becomes %XX. Keys that would map to "." or "..", are
// empty or are longer than 200 bytes are refused.
func DirName(key string) (string, error) {
	if key == "" {
		return "", errors.New("empty key")
	}
	if len(key) > maxKeyLen {
		return "", fmt.Errorf("key longer than %d bytes", maxKeyLen)
	}
	var b strings.Builder
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	name := b.String()
	if name == "." || name == ".." {
		return "", fmt.Errorf("key %q is not a valid name", key)
	}
	return name, nil
}

// KeyFromDirName reverses DirName.
func KeyFromDirName(name string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		if name[i] != '%' {
			b.WriteByte(name[i])
			continue
		}
		if i+2 >= len(name) {
			return "", fmt.Errorf("bad escape in %q", name)
		}
		c, err := strconv.ParseUint(name[i+1:i+3], 16, 8)
		if err != nil {
			return "", fmt.Errorf("bad escape in %q", name)
		}
		b.WriteByte(byte(c))
		i += 2
	}
	return b.String(), nil
}

// TaskDir is the directory of task key on the node in nodeDir.
func TaskDir(nodeDir, key string) (string, error) {
	name, err := DirName(key)
	if err != nil {
		return "", fmt.Errorf("checking task key: %w", err)
	}
	return filepath.Join(nodeDir, TasksDir, name), nil
}
