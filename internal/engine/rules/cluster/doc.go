// Package cluster is the cluster scaling rule: it decides what one compute cluster should do next. Decide is pure: it
// reads the stored state (scale settings, nodes, jobs, the time) and returns a Plan; it does
// no I/O, starts no goroutine and reads no clock, so every rule of DESIGN section 4 is a
// table test with a fixed time. The engine persists the plan, acts on it, and calls Decide
// again whenever the state changes or a deadline from Plan.Deadlines passes (the engine keeps
// those in a timer queue (package runtime), so nothing is found by polling).
//
// # Node classes
//
// A node is live when it is neither leaving nor unusable: idle, running, preparing or
// preempted. Min and Max bound the live nodes, and preparing and preempted nodes count
// because they are on their way (a preempted node waits for capacity to come back, as a
// preparing one does; its job went back to the queue). A node is busy when it is running or
// holds a job, and idle when its state is idle and it holds no job. A state Decide does not
// know is treated as preparing: counted, never released, never given work.
//
// # Rules, in the order Decide applies them
//
//  1. Unusable nodes are released at once, and so are leaving nodes that no longer hold a
//     job (a drained node whose job ended). Both are no longer live, so rule 4 replaces
//     them when that is needed to keep Min.
//  2. Max: when there are more live nodes than Max, the excess goes, cheapest first:
//     preempted nodes, then preparing nodes (highest ID first), then idle nodes (longest
//     idle first), all released at once; then busy nodes (highest ID first) are drained
//     (Plan.Drain): the engine marks them leaving, they finish their job and rule 1 releases
//     them. Leaving nodes never get work.
//  3. Queued jobs are placed in strict FIFO order (SubmittedAt, then ID). A job starts only
//     when Count idle nodes are available together (all or nothing), and takes the longest
//     idle ones, which are the next to reach their idle deadline. The first job that does
//     not fit blocks every later one, even smaller ones that would fit: strict FIFO is simple
//     and fair, and a large job can never starve. A job whose Count exceeds Max can never
//     run; it is reported in Plan.Unplaceable (for the engine to fail) and blocks nothing.
//     A Count below 1 means 1. A queued job that some node already holds is being started
//     by the engine and is left alone.
//  4. Scale up at once: Create is the larger of the gap to Min and the nodes the waiting
//     jobs still lack (the sum of their counts, minus the idle nodes and the preparing or
//     preempted nodes already on the way), never more than Max minus the live nodes.
//  5. Idle scale-down: idle nodes the waiting jobs will take are kept. Of the other idle
//     nodes, enough are protected to keep Min live nodes, and the protected ones are the
//     most recently idle (latest IdleSince, then highest ID), so the cluster sheds the nodes
//     that have been idle longest. Every other idle node is released once now reaches
//     IdleSince + IdleAfter (IdleAfter 0 releases at once; at deadline - 1ns it is kept),
//     and until then its deadline is in Plan.Deadlines. A zero IdleSince counts as idle
//     since forever: the engine must record when a node became idle.
//
// Decide is idempotent: applying a plan (created nodes appear preparing, assigned nodes run
// their job, released nodes disappear, drained nodes leave) and deciding again at the same
// time yields an empty plan with the same deadlines. Its result does not depend on the order
// of nodes or jobs in the input (of two records with the same ID, the first is read). Invalid settings are clamped rather than refused (Max below
// 0 is 0, Min is kept within 0..Max, a negative IdleAfter is 0): validation refuses them
// before they are stored.
package cluster
