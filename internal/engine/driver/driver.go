// Package driver defines where nodes come from. The engine chooses a node's key and
// persists it before calling Create, so a crash between the two is repaired by calling
// Create again with the same key; List by owner finds nodes the engine no longer records.
// Implementations: local (processes on this machine), ssh (attached machines) and, later,
// slurm. The fake subpackage records calls for engine tests.
package driver

import (
	"context"
	"errors"
	"io"
	"time"
)

// ErrNotFound is returned when a node or task does not exist (any more).
var ErrNotFound = errors.New("not found")

// IsNotFound reports whether err means the node or task is gone.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// NodeSpec asks for one node.
type NodeSpec struct {
	// Key identifies the node; chosen and persisted by the engine before Create.
	Key string
	// Owner tags the node with its compute ("workspace/compute") for List.
	Owner    string
	VMSize   string
	VCPUs    int64
	MemoryGB float64
}

// NodeInfo describes a node.
type NodeInfo struct {
	Key   string
	Owner string
	// Address is where other nodes reach this one (MASTER_ADDR for distributed jobs).
	Address   string
	StartedAt time.Time
}

// TaskSpec is one process of a job on one node.
type TaskSpec struct {
	// Key identifies the task on its node (job ID and rank); StartTask is idempotent under it.
	Key     string
	Command []string
	Env     map[string]string
	// CodeDir, when set, is a directory on the engine's machine whose contents are copied
	// into the task's working directory before the command starts.
	CodeDir string
}

// ExecSpec is an interactive command on a node: a person's session, not a job.
type ExecSpec struct {
	Command []string
	Env     map[string]string
	// Stdin feeds the command; Output receives its stdout and stderr.
	Stdin  io.Reader
	Output io.Writer
}

// TaskStatus is the state of a task.
type TaskStatus struct {
	Running  bool
	ExitCode int // valid when !Running
}

// EventKind says what happened.
type EventKind int

const (
	// NodeGone: the node died or was released; its tasks are gone with it.
	NodeGone EventKind = iota + 1
	// TaskExited: a task ended; ExitCode holds its status.
	TaskExited
)

// Event reports a change the engine did not cause by a call it is waiting on.
type Event struct {
	Kind     EventKind
	NodeKey  string
	TaskKey  string
	ExitCode int
}

// Driver brings nodes up and down and runs tasks on them. Every method is safe for
// concurrent use.
type Driver interface {
	// Name is the driver's name as `mlcompute serve --nodes` spells it.
	Name() string

	// Create starts a node and returns once it is usable. It is idempotent under
	// spec.Key: a second call with the key of a live node returns that node.
	Create(ctx context.Context, spec NodeSpec) (NodeInfo, error)

	// Describe returns a live node, or ErrNotFound if it is gone. A live node found here
	// is watched from then on (its events arrive on Events): this is how an engine that
	// restarted adopts the nodes it recorded.
	Describe(ctx context.Context, key string) (NodeInfo, error)

	// List returns the live nodes tagged with owner ("" for every node of this driver),
	// watching them as Describe does.
	List(ctx context.Context, owner string) ([]NodeInfo, error)

	// Terminate stops a node and its tasks and returns once it is confirmed gone.
	// Terminating a node that is already gone returns nil.
	Terminate(ctx context.Context, key string) error

	// StartTask starts a task on a node under a wrapper that records its output and exit
	// status on the node, so they survive an engine restart. It is idempotent under
	// spec.Key. ErrNotFound if the node is gone.
	StartTask(ctx context.Context, nodeKey string, spec TaskSpec) error

	// TaskStatus returns a task's state; ErrNotFound if the node or task is unknown.
	TaskStatus(ctx context.Context, nodeKey, taskKey string) (TaskStatus, error)

	// TaskOutput returns the task's combined output from offset on (empty when there is
	// nothing new). The output stays readable after the task ends, until the node goes.
	TaskOutput(ctx context.Context, nodeKey, taskKey string, offset int64) ([]byte, error)

	// Exec runs an interactive command on a node and returns its exit status when it ends.
	// When ctx ends first the command's process group is killed. ErrNotFound if the node
	// is gone. Unlike a task it leaves no record: a session ends with its connection.
	Exec(ctx context.Context, nodeKey string, spec ExecSpec) (int, error)

	// KillTask kills a task's whole process group; killing an ended task returns nil.
	KillTask(ctx context.Context, nodeKey, taskKey string) error

	// Events delivers NodeGone and TaskExited for watched nodes. The channel is never
	// closed while the driver lives; the engine drains it continuously.
	Events() <-chan Event

	// Close stops watching. It leaves nodes and tasks running: a restarted engine adopts them.
	Close() error
}
