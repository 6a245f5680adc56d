// Package driver defines where nodes come from. A driver has two halves, the shape the
// best provisioners share:
//
//   - Provisioner brings nodes up and down. The engine chooses a node's key and persists
//     it before calling Create, so a crash between the two is repaired by calling Create
//     again with the same key. Create is fast and may return before the node is usable (a
//     queued allocation on a cluster manager can wait minutes): NodeInfo.Ready says which,
//     and a node that becomes ready later is reported by Describe and by a NodeReady event.
//     List by owner finds nodes the engine no longer records (orphans); Terminate is
//     idempotent and returns only once the node is confirmed gone.
//   - TaskRunner runs tasks on a node: StartTask is idempotent under a task key, and
//     TaskStatus, TaskOutput (from an offset), KillTask and Exec follow. TaskPort gives a
//     task its port (MASTER_PORT, an endpoint instance's PORT) from the node itself, so
//     ports are right wherever the node is.
//
// Errors are typed: ErrNotFound (the node or task is gone), ErrNoCapacity (no room for
// the node now), ErrTransient (trying again later may work) and ErrPermanent (trying again
// will not help until someone changes something). Check them with IsNotFound,
// IsNoCapacity, IsTransient and IsPermanent; mark a cause with NoCapacity, Transient or
// Permanent. An error with no kind is unclassified: treat it as transient, with a bound.
//
// Implementations: local (processes on this machine), ssh (attached machines), slurm
// (allocations of a Slurm cluster) and kubernetes (pods); mux routes by key prefix between
// them. The fake subpackage records calls for
// engine tests. The drivertest subpackage is the conformance suite every driver passes,
// the fake included: a new driver runs it by adding one test file that calls
// drivertest.Run.
package driver

import (
	"context"
	"errors"
	"io"
	"strconv"
	"time"
)

// The kinds of driver errors. Match them with errors.Is (or the Is... helpers): drivers
// wrap them with context, so the error itself is rarely one of these values.
var (
	// ErrNotFound: the node or task does not exist (any more).
	ErrNotFound = errors.New("not found")
	// ErrNoCapacity: the provider cannot place the node now (a cloud's insufficient
	// capacity, a full disk or no memory or processes left on this machine). Trying later,
	// or with another size, may work.
	ErrNoCapacity = errors.New("no capacity")
	// ErrTransient: the call failed for a reason that passes (a machine that does not
	// answer, a dropped connection, a node that is not ready yet); the same call may
	// succeed later.
	ErrTransient = errors.New("transient failure")
	// ErrPermanent: the call will keep failing until someone changes something (rejected
	// credentials, a changed host key, a missing or forbidden program, an unsupported
	// operation).
	ErrPermanent = errors.New("permanent failure")
)

// IsNotFound reports whether err means the node or task is gone.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// IsNoCapacity reports whether err means there is no room for the node now.
func IsNoCapacity(err error) bool { return errors.Is(err, ErrNoCapacity) }

// IsTransient reports whether err means the same call may succeed later.
func IsTransient(err error) bool { return errors.Is(err, ErrTransient) }

// IsPermanent reports whether err means the call will keep failing as it is.
func IsPermanent(err error) bool { return errors.Is(err, ErrPermanent) }

// NotFound marks err as ErrNotFound; nil stays nil. The message is err's.
func NotFound(err error) error { return mark(err, ErrNotFound) }

// NoCapacity marks err as ErrNoCapacity; nil stays nil. The message is err's.
func NoCapacity(err error) error { return mark(err, ErrNoCapacity) }

// Transient marks err as ErrTransient; nil stays nil. The message is err's.
func Transient(err error) error { return mark(err, ErrTransient) }

// Permanent marks err as ErrPermanent; nil stays nil. The message is err's.
func Permanent(err error) error { return mark(err, ErrPermanent) }

func mark(err, kind error) error {
	if err == nil || errors.Is(err, kind) {
		return err
	}
	return &kindError{err: err, kind: kind}
}

// kindError is a cause marked with a kind: errors.Is matches both, and the message is
// the cause's alone.
type kindError struct {
	err  error
	kind error
}

func (e *kindError) Error() string   { return e.err.Error() }
func (e *kindError) Unwrap() []error { return []error{e.err, e.kind} }

// NodeSpec asks for one node.
type NodeSpec struct {
	// Key identifies the node; chosen and persisted by the engine before Create.
	Key string
	// Owner tags the node with its compute ("workspace/compute") for List.
	Owner    string
	VMSize   string
	VCPUs    int64
	MemoryGB float64
	// Pod, when set, says how a Kubernetes node's pod asks for resources instead of
	// VCPUs and MemoryGB: an attached Kubernetes compute's instance type. Other drivers
	// ignore it.
	Pod *PodShape
	// GPUs are the machine's GPUs the engine gave a local node, for it alone; the local
	// driver shows them, and only them, to every task on the node (CUDA_VISIBLE_DEVICES
	// and NVIDIA_VISIBLE_DEVICES). Nil leaves the machine's devices as they are; empty
	// (a machine with GPUs, a size without) hides them all. Other drivers ignore it.
	GPUs []string
}

// PodShape is an instance type of an attached Kubernetes compute: where its pods may run
// and what they request and are limited to, in Kubernetes' quantity syntax ("500m",
// "4Gi"; resource names such as "cpu", "memory", "nvidia.com/gpu").
type PodShape struct {
	InstanceType string
	NodeSelector map[string]string
	Requests     map[string]string
	Limits       map[string]string
}

// NodeInfo describes a node.
type NodeInfo struct {
	Key   string
	Owner string
	// Address is where other nodes reach this one (MASTER_ADDR for distributed jobs).
	Address   string
	StartedAt time.Time
	// Ready says the node is usable: tasks can start on it. A node that is not ready yet
	// (a queued allocation) becomes ready later, which Describe and a NodeReady event
	// report, or goes away (NodeGone) if it never does.
	Ready bool
	// Reason says why a node is not ready, in the provider's words (a cluster manager's
	// pending reason such as "Resources" or "Priority"); empty when Ready.
	Reason string
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
	// Inputs are directories on the engine's machine copied into the task's working
	// directory, after CodeDir and before the command starts, through the driver's own
	// channel (no shared file system is assumed).
	Inputs []TaskInput
	// Outputs are paths in the task's working directory that the command writes and
	// FetchOutput reads once it ended: each is created empty before the command starts
	// (a directory, or a file output's parent directory).
	Outputs []TaskOutput
	// Container, when set, runs Command in an image (DESIGN 5 "Containers"). Local nodes
	// with a containerd, attached machines and Slurm nodes do; the engine refuses container
	// environments at submit everywhere else (computes.Core.NoContainerRuntime).
	Container *TaskContainer
}

// TaskContainer is a task's image: an image archive on the engine's machine, imported once
// per machine under the environment's content hash, or else an image reference the node
// pulls (once) where it is not there yet.
type TaskContainer struct {
	Archive string
	Image   string
	Hash    string
	// EnvCache mounts the node's environment cache (a Python environment built on top of
	// the image lives there); Mounts are more host paths mounted at the same paths
	// (find_links directories).
	EnvCache bool
	Mounts   []string
}

// WorkDirEnv names the environment variable that holds the task's working directory, an
// absolute path on the node, in every driver's tasks: inputs and outputs are below it.
// (MLCOMPUTE_TASK_DIR, which local nodes set to the directory above it, marks a task's
// processes and is not this.)
const WorkDirEnv = "MLCOMPUTE_WORK_DIR"

// TaskInput is a directory on the engine's machine whose contents are copied to Dest, a
// relative slash path in the task's working directory (CheckTaskPath).
type TaskInput struct {
	Src  string
	Dest string
}

// TaskOutput is a path the task writes, relative to its working directory
// (CheckTaskPath). Path is created as an empty directory before the command starts; when
// File is set, the command writes one file at Path and only its parent is created.
type TaskOutput struct {
	Path string
	File bool
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
	// NodeGone: the node died, was released or its allocation ended by itself (a time
	// limit, preemption); its tasks are gone with it.
	NodeGone EventKind = iota + 1
	// TaskExited: a task ended; ExitCode holds its status.
	TaskExited
	// NodeReady: a node that Create returned not ready is now usable.
	NodeReady
	// NodeWaiting: a node that is not ready yet waits for a new reason (Reason), such as
	// a scheduler's "0/1 nodes are available: 1 Insufficient cpu."; drivers that cannot
	// tell never send it.
	NodeWaiting
)

// String names the kind, for logs and test failures.
func (k EventKind) String() string {
	switch k {
	case NodeGone:
		return "NodeGone"
	case TaskExited:
		return "TaskExited"
	case NodeReady:
		return "NodeReady"
	case NodeWaiting:
		return "NodeWaiting"
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// Event reports a change the engine did not cause by a call it is waiting on.
type Event struct {
	Kind     EventKind
	NodeKey  string
	TaskKey  string
	ExitCode int
	// Reason says why a node is gone, in the driver's words (a time limit, a failed node,
	// a start timeout); empty when the driver cannot tell.
	Reason string
}

// Provisioner brings nodes up and down: the node half of a driver. Every method is
// ctx-first and safe for concurrent use.
type Provisioner interface {
	// Create starts a node, or returns the node already under spec.Key: it is idempotent
	// under the key (chosen and persisted by the engine first), also when calls race, and
	// never makes a second node for one key. It is fast: it may return before the node is
	// usable, with Ready false (and a Reason); the node is then reported ready by Describe
	// and by a NodeReady event, or gone by NodeGone. The node is watched from then on.
	// ErrNoCapacity when there is no room for it now.
	Create(ctx context.Context, spec NodeSpec) (NodeInfo, error)

	// Describe returns a live node, ready or not, or ErrNotFound if it is gone (also once
	// Terminate returned). A live node found here is watched from then on (its events
	// arrive on Events): this is how an engine that restarted adopts the nodes it recorded.
	Describe(ctx context.Context, key string) (NodeInfo, error)

	// List returns the live nodes tagged with owner ("" for every node of this driver),
	// watching them as Describe does. The engine terminates those it does not record
	// (orphans, say of a crash between Create and the engine's write).
	List(ctx context.Context, owner string) ([]NodeInfo, error)

	// Terminate stops a node and its tasks and returns once it is confirmed gone, so the
	// engine may drop its record. Terminating a node that is already gone (or was never
	// created) returns nil. It emits no NodeGone: the engine asked for it.
	Terminate(ctx context.Context, key string) error
}

// TaskRunner runs tasks and sessions on nodes: the execution half of a driver. Every
// method is ctx-first and safe for concurrent use. Every method returns ErrNotFound when
// the node is gone; StartTask and Exec return ErrTransient on a node that is not ready.
type TaskRunner interface {
	// StartTask starts a task on a node under a wrapper that records its output and exit
	// status on the node, so they survive an engine restart. It is idempotent under
	// spec.Key: a task that exists, running or ended, is not started again. Its end is a
	// TaskExited event (at least once).
	StartTask(ctx context.Context, nodeKey string, spec TaskSpec) error

	// TaskStatus returns a task's state; ErrNotFound if the node or task is unknown.
	TaskStatus(ctx context.Context, nodeKey, taskKey string) (TaskStatus, error)

	// TaskOutput returns the task's combined output from offset on (empty when there is
	// nothing new). The output stays readable after the task ends, until the node goes.
	// ErrNotFound if the node or task is unknown.
	TaskOutput(ctx context.Context, nodeKey, taskKey string, offset int64) ([]byte, error)

	// KillTask kills a task's whole process group; its TaskExited follows with the status
	// of a killed process (128 + the signal). Killing an ended task returns nil and leaves
	// its status as it was; ErrNotFound if the node or task is unknown.
	KillTask(ctx context.Context, nodeKey, taskKey string) error

	// FetchOutput streams, as a tar archive, the path rel (CheckTaskPath) of an ended
	// task's working directory: a directory's contents with names relative to it ("./",
	// "./a/b"), or a file as one entry named by its base name. Regular files keep their
	// bytes and permission bits, symlinks are entries of their own (never followed); a
	// socket, device or fifo under rel fails the fetch with an error naming it (tar
	// itself would skip a socket without a word). An error on the node after the stream
	// began is the error of the reader's last Read, so read to EOF before trusting what
	// was read. Close ends the transfer early. ErrNotFound if the node, the task or rel is
	// unknown.
	FetchOutput(ctx context.Context, nodeKey, taskKey, rel string) (io.ReadCloser, error)

	// Exec runs an interactive command on a node and returns its exit status when it ends.
	// When ctx ends first the command's process group is killed. ErrNotFound if the node
	// is gone; ErrPermanent from a driver that offers no sessions. Unlike a task it leaves
	// no record: a session ends with its connection.
	Exec(ctx context.Context, nodeKey string, spec ExecSpec) (int, error)

	// TaskPort returns a TCP port that a task on the node may listen on: one free on the
	// node now, found on the node itself (a task's port is the node's business, not the
	// engine's machine's). It reserves nothing: the engine records the port and starts the
	// task soon after, and a port taken meanwhile makes the task fail to listen, which is
	// a task's failure like any other. ErrTransient on a node that is not ready.
	TaskPort(ctx context.Context, nodeKey string) (int, error)
}

// OutputWatcher is what a driver offers, besides TaskOutput, when it can tell the moment
// a task's output grows, so that a follower of the output is woken by the write instead
// of reading again on an interval. It is optional: a driver without it is read again
// after a short wait.
type OutputWatcher interface {
	// WatchOutput arms a watch of a task's output and returns once it is armed. The
	// channel then receives after each change (writes are coalesced: one receive may
	// stand for many) and also when the task ends, until ctx ends; it is closed when the
	// task's output is gone (its node was terminated) or ctx ended. A read made after
	// WatchOutput returned therefore never misses a write that the channel does not
	// announce. ErrNotFound if the node or the task is unknown (not started yet);
	// ErrPermanent when the driver cannot watch this node's tasks.
	WatchOutput(ctx context.Context, nodeKey, taskKey string) (<-chan struct{}, error)
}

// Driver brings nodes up and down and runs tasks on them. Every method is safe for
// concurrent use.
type Driver interface {
	// Name is the driver's name as `mlcompute serve --nodes` spells it.
	Name() string

	Provisioner
	TaskRunner

	// Events delivers NodeReady, NodeGone and TaskExited for watched nodes. The channel
	// is never closed while the driver lives; the engine drains it continuously.
	Events() <-chan Event

	// Close stops watching. It leaves nodes and tasks running: a restarted engine adopts them.
	Close() error
}

// MachineTaskKey is the key of task taskKey of node nodeKey among every task on the
// node's machine: the nodes of one machine (local nodes, the nodes of one attached machine
// or Slurm work dir) share its task directories and its containerd, and their task keys
// repeat (every endpoint instance's first task is serve-0).
func MachineTaskKey(nodeKey, taskKey string) string { return nodeKey + "." + taskKey }
