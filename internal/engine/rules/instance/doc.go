// Package instance is the compute instance's lifecycle rule: what one instance does next.
// Decide is pure: it reads the stored state (the Lifecycle, the instance's node, its
// jobs, open sessions, schedules, setup scripts and idle setting) and the time, and returns
// the new Lifecycle with the actions to carry out; it does no I/O, starts no goroutine and reads
// no clock, so every transition is a table test on a fixed time. The instances' controller
// maps the store to an Input, calls Decide, commits, and then acts.
//
// An instance keeps its desired state (Running or Stopped: set by the user, a schedule or
// idle shutdown) apart from its settings, so an apply that changes settings never starts an
// instance that was stopped.
//
// # Rules, in the order Decide applies them
//
//  1. Schedules (package schedule): the latest firing due since the last pass (also one
//     missed while the engine was down) sets the desired state, trigger Schedule; the next
//     firing is the schedule timer (none clears it).
//  2. A node that went idle counts as activity at its idle time (its job or setup script
//     ended then).
//  3. Desired Stopped: the instance's jobs are canceled and its node released (Stopping);
//     once no node record is left it is Stopped, and an operation in progress succeeded.
//  4. Resizing (a new size, a restart, or a start after failed setup scripts): jobs are
//     canceled and the node released; once the old node is gone a fresh one starts.
//  5. No node: once no node record is left a node is created, a new start (StartSeq) with
//     no setup stage begun; the state is Starting (Creating the first time).
//  6. Setup failed: nothing happens until the user starts or restarts the instance.
//  7. The node is preparing: wait; unusable: release it (rule 5 replaces it).
//  8. Setup scripts, on the fresh node of every start: the creation script once in the
//     instance's life (until it succeeds), then the startup script; each runs as the node's
//     task until it exits or reaches its timeout, when its task is killed. With none left
//     the instance is Running and its idle clock starts.
//  9. Running: one job at a time; a free idle node takes the first queued job by the
//     cluster's placement (rules/cluster's Place, on one node). The state is JobRunning
//     while a job holds the node.
//  10. Idle shutdown (package idle), decided last from this pass's facts (a job that just
//     ended or just started counts as of now): stop the instance (trigger IdleShutdown),
//     or set the idle timer to the deadline, or clear it.
package instance
