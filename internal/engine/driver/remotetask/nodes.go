package remotetask

import (
	"context"
	"fmt"
	"iter"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"k8s.io/utils/clock"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
)

// Node is what a driver of remote machines keeps about every node it watches, whatever
// stands for the node on the machines (a Slurm job, a pod). The driver's own node type
// embeds it and adds what only it knows.
type Node struct {
	Key  string
	Info driver.NodeInfo
	// Seen is when the driver first saw the node, or when it was made when the machines
	// say so: its start timeout counts from it.
	Seen time.Time
	// Terminating says Terminate is ending the node: its end is no NodeGone.
	Terminating bool
	// Tasks are its watched tasks; their watches end with the node.
	Tasks *Tasks

	ctx    context.Context
	cancel context.CancelFunc
}

// Base gives the table the Node a driver's node type embeds.
func (n *Node) Base() *Node { return n }

// Context ends when the node is no longer watched (dropped, replaced or terminated with its
// tasks stopped) or the driver closes.
func (n *Node) Context() context.Context { return n.ctx }

// Watched is a driver's node type: one that embeds Node.
type Watched interface{ Base() *Node }

// Table is a driver's watched nodes by key. It is guarded by the driver's mutex, which also
// guards what the driver keeps about each node (its Info, its job or pod): the methods say
// which of them take it and which are called with it held.
type Table[N Watched] struct {
	mu    *sync.Mutex
	nodes map[string]N
	ctx   context.Context
	clock clock.Clock
	wg    *sync.WaitGroup
	log   hclog.Logger
}

// NewTable returns an empty table guarded by mu. Its nodes' contexts end with ctx (the
// driver's), and their tasks' watches are counted in wg, which the driver's Close waits for.
func NewTable[N Watched](mu *sync.Mutex, ctx context.Context, clk clock.Clock, wg *sync.WaitGroup, log hclog.Logger) *Table[N] {
	return &Table[N]{mu: mu, nodes: map[string]N{}, ctx: ctx, clock: clk, wg: wg, log: log}
}

// NewNode returns the Node of a node about to be watched, seen now, with a context and
// tasks of its own. Put watches it.
func (t *Table[N]) NewNode(key string, info driver.NodeInfo) Node {
	ctx, cancel := context.WithCancel(t.ctx)
	return Node{Key: key, Info: info, Seen: t.clock.Now(), ctx: ctx, cancel: cancel,
		Tasks: New(ctx, t.clock, t.wg, t.log.With("node", key))}
}

// Get returns the node watched under key. Called with the lock held.
func (t *Table[N]) Get(key string) (N, bool) {
	n, ok := t.nodes[key]
	return n, ok
}

// Put watches n under its key, in place of the node watched there before, whose tasks'
// watches end. Called with the lock held.
func (t *Table[N]) Put(n N) {
	key := n.Base().Key
	if old, ok := t.nodes[key]; ok && old.Base() != n.Base() {
		old.Base().cancel()
	}
	t.nodes[key] = n
}

// Current says whether n is still the node watched under its key and not being
// terminated: what a watch that looked at n without the lock checks before it acts on it.
// Called with the lock held.
func (t *Table[N]) Current(n N) bool {
	b := n.Base()
	cur, ok := t.nodes[b.Key]
	return ok && cur.Base() == b && !b.Terminating
}

// Drop stops watching n (and its tasks), when it is still the node watched under its key.
// Called with the lock held.
func (t *Table[N]) Drop(n N) {
	b := n.Base()
	b.cancel()
	if cur, ok := t.nodes[b.Key]; ok && cur.Base() == b {
		delete(t.nodes, b.Key)
	}
}

// Forget stops watching whatever node is watched under key. It takes the lock.
func (t *Table[N]) Forget(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n, ok := t.nodes[key]; ok {
		t.Drop(n)
	}
}

// MarkTerminating marks the node watched under key as being terminated, so that its end
// is no NodeGone; with stopTasks its tasks' watches end now too. It takes the lock.
func (t *Table[N]) MarkTerminating(key string, stopTasks bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n, ok := t.nodes[key]; ok {
		n.Base().Terminating = true
		if stopTasks {
			n.Base().cancel()
		}
	}
}

// Live returns the node watched under key when it is not being terminated; otherwise it
// asks describe, which finds the node on the machines and watches it (the driver's
// Describe), and returns what that watched. ErrNotFound when there is no such node. It
// takes the lock.
func (t *Table[N]) Live(ctx context.Context, key string, describe func(ctx context.Context, key string) (driver.NodeInfo, error)) (N, error) {
	t.mu.Lock()
	n, ok := t.nodes[key]
	live := ok && !n.Base().Terminating
	t.mu.Unlock()
	if live {
		return n, nil
	}
	var none N
	if _, err := describe(ctx, key); err != nil {
		return none, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if n, ok = t.nodes[key]; !ok {
		return none, fmt.Errorf("node %s: %w", key, driver.ErrNotFound)
	}
	return n, nil
}

// Len is the number of watched nodes. Called with the lock held.
func (t *Table[N]) Len() int { return len(t.nodes) }

// All yields the watched nodes by key, in no order. Called with the lock held, which the
// loop's body keeps.
func (t *Table[N]) All() iter.Seq2[string, N] {
	return func(yield func(string, N) bool) {
		for k, n := range t.nodes {
			if !yield(k, n) {
				return
			}
		}
	}
}
