// Package pipeline decides how a pipeline job moves: which steps are ready, which are
// skipped because an upstream step failed, which running steps are canceled, whether a
// step that ended is retried, and when the pipeline itself has ended and how. It is pure:
// the caller passes the pipeline's shape and its steps' states, and applies the decision.
//
// # Shape
//
// A pipeline is a set of steps. A step binds each of its inputs either to a pipeline input
// (${{parent.inputs.x}}), to an upstream step's output (${{parent.jobs.<step>.outputs.<o>}})
// or to a literal. Validate refuses, naming the YAML path: a binding to an unknown step,
// output or pipeline input, a type mismatch between an output and the input it feeds, and a
// cycle. Edges run from the step whose output is bound to the step that binds it.
//
// # Readiness
//
// A step is ready once every upstream step it binds has Completed (its outputs are then
// registered, in the same transaction that completed it). Steps with no upstream are ready
// at once, and independent branches run at the same time.
//
// # Failure
//
// A step fails once its retries are spent on its own failures (Retry). Every step that
// depends on a failed step, directly or through other steps, becomes Skipped with the
// reason "upstream <step> failed", naming the step that failed. With
// continue_on_step_failure false (the default) no other step starts after a failure:
// running steps are canceled and steps not started are Canceled. With it true, branches
// that do not depend on the failed step run to their end. The pipeline ends Failed when a
// step failed, Canceled when the user canceled it, Completed otherwise.
package pipeline
