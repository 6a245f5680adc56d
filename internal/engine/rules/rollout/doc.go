// Package rollout is an online endpoint's rule: what its instances do next. Decide is pure:
// it reads the endpoint's record, the router's samples of its autoscaled deployments and of
// its draining instances, and the time, and returns the new record with what to carry out
// once it is committed (the instances to start, drain and terminate, the timers); it does no
// I/O, starts no goroutine and reads no clock, so every transition is a table test on a
// fixed time. The endpoints' controller maps the store and the router to an Input, calls
// Decide, commits, and then acts. Probe is the rule for one probe result, Fail for an
// instance that failed (its process exited, its node was lost, a probe gave up on it) and
// Ready for one that passed its readiness.
//
// # Rules, in the order Decide applies them
//
//  1. Autoscaled deployments (rules/autoscale): one that is due (its polling interval
//     passed) or kicked (the router held a request) takes a sample and commits the count
//     the rule decides as Desired, with the decision; a step from zero clears StartError.
//     A kick out of turn leaves the arrivals to the next polling sample.
//  2. Every deployment is kept at its target (instance_count, or Desired) of instances of
//     its current generation: missing ones are added (Starting), extra ones drained, those
//     not ready first, then the newest.
//  3. Once a deployment has its target of ready instances of its generation, its older
//     generations drain: the rollout is done.
//  4. The declared split becomes the live one once every deployment it sends requests to
//     has rolled out; a retiring deployment the live split no longer uses is let go, and
//     the instances of a deployment that is gone drain.
//  5. A draining instance is terminated at its DrainUntil (the request timeout + 1 s after
//     its drain began; at once when it was not ready); one of an autoscaled deployment also
//     once the router counts no request in flight on it, 1 s after its drain began.
//  6. A failed instance starts again at its RestartAt, as a new process (Restarts + 1).
//  7. The endpoint is provisioned once every deployment had its target ready.
//
// Fail: a start that failed before the instance was ready once counts (Failures); the
// instance restarts after the back-off (1 s doubling per failed start in a row, at most 5
// minutes: rules/backoff), and FailedStartsBeforeError failed starts in a row set the
// deployment's Error, so the endpoint reads Failed until an instance of it is ready.
//
// Probe: success_threshold readiness passes in a row make an instance ready;
// failure_threshold failures in a row make a ready one not ready, and fail one that was
// never ready once initial_delay + period × failure_threshold has passed since its start;
// failure_threshold liveness failures in a row fail it. While the router holds requests for
// a starting instance's deployment, its readiness is probed every HeldReadyProbe.
package rollout
