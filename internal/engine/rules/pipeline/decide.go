package pipeline

import (
	"fmt"
	"sort"
)

// StepState is a step's state and, once it ended, why.
type StepState struct {
	Status Status
	// Reason is recorded with Skipped and Canceled; for a Skipped step it names the step
	// that failed.
	Reason string
}

// Settings are the pipeline's settings the rule reads.
type Settings struct {
	// ContinueOnStepFailure lets branches that do not depend on a failed step run to
	// their end (default false: nothing starts after a failure, running steps are
	// canceled).
	ContinueOnStepFailure bool
	// Canceled says the user canceled the pipeline: running steps are canceled and no step
	// starts.
	Canceled bool
}

// Decision is what to do now. The caller records every change in one write, then starts
// and cancels.
type Decision struct {
	// Start lists the steps that are ready: every upstream step Completed.
	Start []string
	// Skip maps a step to the reason it will never run ("upstream train failed").
	Skip map[string]string
	// Cancel lists running steps to cancel.
	Cancel []string
	// Abandon maps a step that never started to the reason it will not (the pipeline
	// stopped after a failure, or was canceled); it ends Canceled.
	Abandon map[string]string
	// Done says every step has ended (after this decision is applied); Status is then the
	// pipeline's final status.
	Done   bool
	Status Status
}

// Decide returns what to do for a pipeline whose steps are in the given states (a step
// missing from states is Pending). It is safe to call again at any time: a decision
// applied changes the states, and the next call moves on from there.
func Decide(p Pipeline, states map[string]StepState, s Settings) Decision {
	state := func(name string) StepState {
		if st, ok := states[name]; ok && st.Status != "" {
			return st
		}
		return StepState{Status: Pending}
	}
	steps := make(map[string]Step, len(p.Steps))
	for _, st := range p.Steps {
		steps[st.Name] = st
	}
	order := names(steps)

	// The step that blocks each step, if any: through every path upstream (in name
	// order), the first ancestor that failed or was canceled. A skipped ancestor passes on
	// the step that blocked it.
	type block struct {
		step   string
		status Status
	}
	blockedBy := map[string]block{}
	var blocker func(name string, seen map[string]bool) block
	blocker = func(name string, seen map[string]bool) block {
		if b, ok := blockedBy[name]; ok {
			return b
		}
		if seen[name] {
			return block{} // a cycle; Validate refuses it before this runs
		}
		seen[name] = true
		var b block
		for _, up := range steps[name].Upstream() {
			if _, ok := steps[up]; !ok {
				continue
			}
			switch st := state(up); st.Status {
			case Failed, Canceled:
				b = block{up, st.Status}
			default:
				b = blocker(up, seen)
			}
			if b.step != "" {
				break
			}
		}
		blockedBy[name] = b
		return b
	}

	// A step canceled from outside the pipeline (its compute deleted, say) stops the
	// pipeline as a failure does.
	failed, canceled := false, s.Canceled
	for _, name := range order {
		switch state(name).Status {
		case Failed:
			failed = true
		case Canceled:
			canceled = true
		}
	}
	stopping := s.Canceled || (failed || canceled) && !s.ContinueOnStepFailure

	d := Decision{Skip: map[string]string{}, Abandon: map[string]string{}}
	ended := 0
	for _, name := range order {
		st := state(name)
		switch {
		case st.Status.Terminal():
			ended++
		case st.Status == Running:
			if stopping {
				d.Cancel = append(d.Cancel, name)
				ended++
			}
		default: // Pending
			if b := blocker(name, map[string]bool{}); b.step != "" {
				d.Skip[name] = fmt.Sprintf("upstream %s %s", b.step, map[Status]string{Failed: "failed", Canceled: "was canceled"}[b.status])
				ended++
				continue
			}
			if stopping {
				reason := "pipeline canceled"
				if !s.Canceled {
					reason = "pipeline stopped after a step failed (continue_on_step_failure is false)"
				}
				d.Abandon[name] = reason
				ended++
				continue
			}
			if ready(steps[name], state) {
				d.Start = append(d.Start, name)
			}
		}
	}
	sort.Strings(d.Start)
	sort.Strings(d.Cancel)

	// Done once every step has ended, or will have once this decision is applied. Steps
	// still running that are not canceled keep the pipeline going.
	d.Done = ended == len(order)
	if d.Done {
		switch {
		case failed:
			d.Status = Failed
		case canceled || len(d.Cancel) > 0:
			d.Status = Canceled
		default:
			d.Status = Completed
		}
	}
	return d
}

// ready reports whether every upstream step of s has Completed.
func ready(s Step, state func(string) StepState) bool {
	for _, up := range s.Upstream() {
		if state(up).Status != Completed {
			return false
		}
	}
	return true
}

// Exit says how a step's run ended, for Retry.
type Exit int

const (
	// ExitFailed: the step's own failure (a non-zero exit, its timeout).
	ExitFailed Exit = iota + 1
	// ExitNodeLost: the node under it went away (preempted, deleted, died).
	ExitNodeLost
)

// Next says what happens to a step after a run that did not complete.
type Next int

const (
	// Fail: the step is Failed.
	Fail Next = iota + 1
	// RetryStep: the step runs again, using one of its retries.
	RetryStep
	// Requeue: the step runs again without using a retry (its node was lost).
	Requeue
)

// Retry decides what follows a run that ended without completing. retriesUsed counts the
// runs that already used a retry; maxRetries is retry_settings.max_retries. A lost node
// requeues the step and never uses a retry: recovery is separate from retries.
func Retry(exit Exit, retriesUsed, maxRetries int) Next {
	if exit == ExitNodeLost {
		return Requeue
	}
	if retriesUsed < maxRetries {
		return RetryStep
	}
	return Fail
}
