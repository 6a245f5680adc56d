// Package metrics is what the engine shows Prometheus (DESIGN 9): a Collector that reads the
// engine's state at scrape time (nodes by state, jobs by status), histograms fed by the
// engine's node lifecycle through a Recorder, and HTTP middleware for the API and the scoring
// router. It imports neither the engine nor the router's internals, so the engine can import
// it for the Recorder.
//
// Wiring the Recorder into the engine (not done here: it needs engine.Config, in the engine's
// top package): engine.Config and computes.Config take a Recorder (default Nop{}), which the
// daemon sets to the *Metrics it serves (daemon.Run builds it next to the scoring listener),
// and the node lifecycle calls
//
//   - NodeCreated(compute key, now - node.CreatedOn) where a preparing node becomes idle:
//     computes.Core.createdNode when the driver returns a ready node, and
//     computes.Core.NodeReady on a NodeReady event;
//   - NodeReleased(compute key, now - release decision) where the driver confirms a released
//     node gone (the callback that computes.Core.releaseNode gives lifecycle.Release); the node
//     record needs the time it was marked Released;
//   - IdleReleaseLateness(now - (node.IdleSince + scale_down_nodes_after_idle_duration))
//     for each node the cluster rule releases for idleness (plan.Release in
//     controllers/clusters.Controller.Pass), not for nodes released because their compute
//     is deleted.
package metrics

import "time"

// Recorder receives the node lifecycle events that the store cannot show at scrape time.
// The engine calls it from its controllers; every method must be cheap and must not block.
type Recorder interface {
	// NodeCreated is called once per node when it becomes usable (state idle), with the
	// time from the node's record being created (preparing) to that moment. compute is the
	// compute's key ("workspace/name").
	NodeCreated(compute string, d time.Duration)
	// NodeReleased is called once per node when the driver confirms it gone after a
	// release, with the time from the release decision to that confirmation.
	NodeReleased(compute string, d time.Duration)
	// IdleReleaseLateness is called when an idle node is released for idleness, with how
	// long after its idle deadline (idle since + scale_down_nodes_after_idle_duration) the
	// release was decided; zero or positive.
	IdleReleaseLateness(d time.Duration)
}

// Nop is a Recorder that records nothing: the engine's default.
type Nop struct{}

// NodeCreated does nothing.
func (Nop) NodeCreated(string, time.Duration) {}

// NodeReleased does nothing.
func (Nop) NodeReleased(string, time.Duration) {}

// IdleReleaseLateness does nothing.
func (Nop) IdleReleaseLateness(time.Duration) {}

var _ Recorder = Nop{}
