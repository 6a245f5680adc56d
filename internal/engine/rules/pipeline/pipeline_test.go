package pipeline

import (
	"reflect"
	"strings"
	"testing"
)

// out binds an input to an upstream step's output.
func out(path, step, output string) Input {
	return Input{Name: path[strings.LastIndex(path, ".")+1:], Type: TypeFolder, Binding: Binding{Path: path, Step: step, Output: output}}
}

// prepTrainScore is the three-step pipeline of the examples: prep -> train -> score, with
// score also reading prep's output, and an independent report step.
func prepTrainScore() Pipeline {
	return Pipeline{
		Inputs: map[string]string{"raw": TypeFolder},
		Steps: []Step{
			{Name: "prep", Inputs: []Input{{Name: "raw", Type: TypeFolder, Binding: Binding{Path: "jobs.prep.inputs.raw", ParentInput: "raw"}}}, Outputs: map[string]string{"data": TypeFolder}},
			{Name: "train", Inputs: []Input{out("jobs.train.inputs.data", "prep", "data")}, Outputs: map[string]string{"model": TypeFolder}},
			{Name: "score", Inputs: []Input{out("jobs.score.inputs.model", "train", "model"), out("jobs.score.inputs.data", "prep", "data")}, Outputs: map[string]string{"scores": TypeFile}},
			{Name: "report", Outputs: map[string]string{"html": TypeFile}},
		},
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Pipeline)
		want []string // "path: message" prefixes
	}{
		{name: "valid", edit: func(*Pipeline) {}},
		{
			name: "unknown step",
			edit: func(p *Pipeline) { p.Steps[1].Inputs[0].Binding.Step = "prepare" },
			want: []string{`jobs.train.inputs.data: unknown step "prepare" (steps: prep, report, score, train)`},
		},
		{
			name: "unknown output",
			edit: func(p *Pipeline) { p.Steps[1].Inputs[0].Binding.Output = "dataset" },
			want: []string{`jobs.train.inputs.data: step "prep" has no output "dataset" (outputs: data)`},
		},
		{
			name: "unknown pipeline input",
			edit: func(p *Pipeline) { p.Steps[0].Inputs[0].Binding.ParentInput = "rawdata" },
			want: []string{`jobs.prep.inputs.raw: unknown pipeline input "rawdata" (inputs: raw)`},
		},
		{
			name: "type mismatch with an output",
			edit: func(p *Pipeline) { p.Steps[1].Inputs[0].Type = TypeFile },
			want: []string{`jobs.train.inputs.data: input "data" is uri_file but output prep.data is uri_folder`},
		},
		{
			name: "type mismatch with a pipeline input",
			edit: func(p *Pipeline) { p.Inputs["raw"] = TypeLiteral },
			want: []string{`jobs.prep.inputs.raw: input "raw" is uri_folder but pipeline input "raw" is literal`},
		},
		{
			name: "own output",
			edit: func(p *Pipeline) { p.Steps[1].Inputs[0] = out("jobs.train.inputs.data", "train", "model") },
			want: []string{`jobs.train.inputs.data: step "train" binds its own output "model"`},
		},
		{
			name: "cycle",
			edit: func(p *Pipeline) {
				p.Steps[0].Inputs = append(p.Steps[0].Inputs, out("jobs.prep.inputs.scores", "score", "scores"))
				p.Steps[0].Inputs[1].Type = TypeFile
			},
			want: []string{`jobs.prep: steps form a cycle: prep -> score -> prep`},
		},
		{
			name: "every error, ordered by path",
			edit: func(p *Pipeline) {
				p.Steps[2].Inputs[0].Binding.Output = "weights"
				p.Steps[1].Inputs[0].Binding.Step = "nope"
			},
			want: []string{
				`jobs.score.inputs.model: step "train" has no output "weights"`,
				`jobs.train.inputs.data: unknown step "nope"`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := prepTrainScore()
			tt.edit(&p)
			errs := Validate(p)
			if len(errs) != len(tt.want) {
				t.Fatalf("Validate = %v, want %d errors %v", errs, len(tt.want), tt.want)
			}
			for i, e := range errs {
				if !strings.HasPrefix(e.Error(), tt.want[i]) {
					t.Errorf("error %d = %q, want prefix %q", i, e.Error(), tt.want[i])
				}
			}
		})
	}
}

func TestDecide(t *testing.T) {
	type states = map[string]StepState
	st := func(s Status) StepState { return StepState{Status: s} }
	tests := []struct {
		name     string
		states   states
		settings Settings
		want     Decision
	}{
		{
			name:   "at submit the roots start together",
			states: states{},
			want:   Decision{Start: []string{"prep", "report"}},
		},
		{
			name:   "a step waits for every upstream step",
			states: states{"prep": st(Completed), "report": st(Running)},
			want:   Decision{Start: []string{"train"}},
		},
		{
			name:   "score waits for train even though prep is done",
			states: states{"prep": st(Completed), "train": st(Running), "report": st(Completed)},
			want:   Decision{},
		},
		{
			name:   "all completed",
			states: states{"prep": st(Completed), "train": st(Completed), "score": st(Completed), "report": st(Completed)},
			want:   Decision{Done: true, Status: Completed},
		},
		{
			name:   "a failure skips its dependents and stops the rest",
			states: states{"prep": st(Completed), "train": st(Failed), "report": st(Running)},
			want: Decision{
				Skip:   map[string]string{"score": "upstream train failed"},
				Cancel: []string{"report"},
				Done:   true, Status: Failed,
			},
		},
		{
			name:   "a failure at the root skips every dependent, naming the root",
			states: states{"prep": st(Failed)},
			want: Decision{
				Skip:    map[string]string{"train": "upstream prep failed", "score": "upstream prep failed"},
				Abandon: map[string]string{"report": "pipeline stopped after a step failed (continue_on_step_failure is false)"},
				Done:    true, Status: Failed,
			},
		},
		{
			name:     "continue_on_step_failure lets an independent branch finish",
			states:   states{"prep": st(Failed)},
			settings: Settings{ContinueOnStepFailure: true},
			want: Decision{
				Start: []string{"report"},
				Skip:  map[string]string{"train": "upstream prep failed", "score": "upstream prep failed"},
			},
		},
		{
			name:     "continue_on_step_failure ends Failed once the branch is done",
			states:   states{"prep": st(Failed), "train": st(Skipped), "score": st(Skipped), "report": st(Completed)},
			settings: Settings{ContinueOnStepFailure: true},
			want:     Decision{Done: true, Status: Failed},
		},
		{
			name:     "cancel cancels running steps and abandons the rest",
			states:   states{"prep": st(Completed), "train": st(Running), "report": st(Completed)},
			settings: Settings{Canceled: true},
			want: Decision{
				Cancel:  []string{"train"},
				Abandon: map[string]string{"score": "pipeline canceled"},
				Done:    true, Status: Canceled,
			},
		},
		{
			name:   "a step canceled from outside stops the pipeline as Canceled",
			states: states{"prep": st(Completed), "train": st(Canceled), "report": st(Completed)},
			want: Decision{
				Skip: map[string]string{"score": "upstream train was canceled"},
				Done: true, Status: Canceled,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Decide(prepTrainScore(), tt.states, tt.settings)
			norm := func(d Decision) Decision {
				if len(d.Skip) == 0 {
					d.Skip = nil
				}
				if len(d.Abandon) == 0 {
					d.Abandon = nil
				}
				return d
			}
			if g, w := norm(got), norm(tt.want); !reflect.DeepEqual(g, w) {
				t.Errorf("Decide =\n %+v\nwant\n %+v", g, w)
			}
		})
	}
}

// TestDecideConverges applies decisions as a controller would, with steps completing or
// failing in turn, and checks the pipeline always ends, every step ended, and a dependent
// of a failed step never ran.
func TestDecideConverges(t *testing.T) {
	for _, failing := range []string{"", "prep", "train", "score", "report"} {
		for _, cont := range []bool{false, true} {
			p := prepTrainScore()
			states := map[string]StepState{}
			ran := map[string]bool{}
			startedAfterFailure := false
			var d Decision
			for i := 0; i < 20; i++ {
				d = Decide(p, states, Settings{ContinueOnStepFailure: cont})
				for s, r := range d.Skip {
					states[s] = StepState{Status: Skipped, Reason: r}
				}
				for s, r := range d.Abandon {
					states[s] = StepState{Status: Canceled, Reason: r}
				}
				for _, s := range d.Cancel {
					states[s] = StepState{Status: Canceled}
				}
				if d.Done {
					break
				}
				// Every started step ends at once, the failing one Failed.
				for _, st := range states {
					if st.Status == Failed && len(d.Start) > 0 {
						startedAfterFailure = true
					}
				}
				for _, s := range d.Start {
					ran[s] = true
					if s == failing {
						states[s] = StepState{Status: Failed}
					} else {
						states[s] = StepState{Status: Completed}
					}
				}
			}
			if !d.Done {
				t.Fatalf("failing=%q continue=%v: not done after 20 decisions: %v", failing, cont, states)
			}
			wantStatus := Completed
			if failing != "" {
				wantStatus = Failed
			}
			if d.Status != wantStatus {
				t.Errorf("failing=%q continue=%v: status %s, want %s", failing, cont, d.Status, wantStatus)
			}
			for _, s := range p.Steps {
				if !states[s.Name].Status.Terminal() {
					t.Errorf("failing=%q: step %s ended %q", failing, s.Name, states[s.Name].Status)
				}
			}
			if failing == "prep" && (ran["train"] || ran["score"]) {
				t.Errorf("a dependent of the failed prep ran: %v", ran)
			}
			if failing != "" && !cont && startedAfterFailure {
				t.Errorf("failing=%q: a step started after the failure without continue_on_step_failure", failing)
			}
			if !ran["report"] {
				t.Errorf("failing=%q continue=%v: the independent report step never ran", failing, cont)
			}
		}
	}
}

func TestRetry(t *testing.T) {
	tests := []struct {
		exit      Exit
		used, max int
		want      Next
		name      string
	}{
		{ExitFailed, 0, 0, Fail, "no retries"},
		{ExitFailed, 0, 2, RetryStep, "first retry"},
		{ExitFailed, 2, 2, Fail, "retries spent"},
		{ExitNodeLost, 0, 0, Requeue, "a lost node never fails the step"},
		{ExitNodeLost, 2, 2, Requeue, "a lost node does not use a retry"},
	}
	for _, tt := range tests {
		if got := Retry(tt.exit, tt.used, tt.max); got != tt.want {
			t.Errorf("%s: Retry = %v, want %v", tt.name, got, tt.want)
		}
	}
}
