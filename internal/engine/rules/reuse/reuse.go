// Package reuse decides whether a pipeline step can reuse an earlier run instead of
// running. It is pure: the caller computes the parts of the step's key from what the step
// binds, and says which blobs its store holds.
//
// # The key
//
// The key is sha256 over every part that decides what the step computes: the bound step
// spec (command, environment variables, distribution), the code's content hash, the
// environment's content hash, the content digest of every input, the literal inputs and
// the output declarations. The compute target and the node count are not part of it: the
// same step on another target computes the same thing. A part that cannot be computed (an
// input whose digest is not known) means no key at all, and the step runs: a key is never
// partial, so two different steps can never share one by leaving out what differs.
//
// # A hit
//
// A step reuses the newest earlier run with its key whose recorded outputs are all still
// in the store with their digests. A run whose blob is gone is never a hit, so a deleted
// or collected output makes the step run again. force_rerun and is_deterministic: false
// make the step run whatever the store holds; their results are recorded under the key
// and stay reusable by later runs.
package reuse

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
)

// Parts are what a step's key is made of. Maps are encoded with sorted keys.
type Parts struct {
	Command      string            `json:"command"`
	Env          map[string]string `json:"environment_variables"`
	Distribution string            `json:"distribution"`
	// CodeHash is the code snapshot's content hash, "" when the step has no code.
	CodeHash string `json:"code"`
	// EnvironmentHash is the environment's content hash, "" when the step names none.
	EnvironmentHash string `json:"environment"`
	// Inputs maps each file or folder input to its content digest.
	Inputs map[string]string `json:"inputs"`
	// Literals maps each literal input to its value, as written.
	Literals map[string]string `json:"literals"`
	// Outputs maps each output to its declaration ("uri_folder upload").
	Outputs map[string]string `json:"outputs"`
}

// Unknown marks a part whose value could not be computed (an input whose producer has
// not registered it, an environment whose hash is not known yet). A Parts holding it has
// no key.
const Unknown = "\x00unknown"

// Key returns the step's reuse key, "sha256:<hex>", or false with the name of the first
// part that could not be computed.
func Key(p Parts) (key string, ok bool, missing string) {
	if missing := p.unknown(); missing != "" {
		return "", false, missing
	}
	// encoding/json writes struct fields in order and map keys sorted: a canonical form.
	raw, err := json.Marshal(p)
	if err != nil { // only strings and maps of strings: cannot fail
		return "", false, fmt.Sprintf("encoding: %v", err)
	}
	sum := sha256.Sum256(raw)
	return "sha256:" + hex.EncodeToString(sum[:]), true, ""
}

func (p Parts) unknown() string {
	switch {
	case p.CodeHash == Unknown:
		return "code"
	case p.EnvironmentHash == Unknown:
		return "environment"
	}
	for _, name := range slices.Sorted(maps.Keys(p.Inputs)) {
		if d := p.Inputs[name]; d == Unknown || d == "" {
			return "inputs." + name
		}
	}
	return ""
}

// Component is one part of a key, for `job show --explain`.
type Component struct {
	Name string
	// Value is the part's value, or its digest when it is long.
	Value string
	// Last is the same part in the last run of the step's name; Differs says they differ.
	Last    string
	Differs bool
}

// Explain lists the parts of a key next to those of the last run of the same step name,
// in a fixed order, marking those that differ. last may be nil (no earlier run).
func Explain(cur Parts, last *Parts) []Component {
	flat := func(p Parts) [][2]string {
		out := [][2]string{
			{"command", p.Command},
			{"distribution", p.Distribution},
			{"code", p.CodeHash},
			{"environment", p.EnvironmentHash},
		}
		for _, k := range slices.Sorted(maps.Keys(p.Env)) {
			out = append(out, [2]string{"environment_variables." + k, p.Env[k]})
		}
		for _, k := range slices.Sorted(maps.Keys(p.Inputs)) {
			out = append(out, [2]string{"inputs." + k, p.Inputs[k]})
		}
		for _, k := range slices.Sorted(maps.Keys(p.Literals)) {
			out = append(out, [2]string{"inputs." + k, p.Literals[k]})
		}
		for _, k := range slices.Sorted(maps.Keys(p.Outputs)) {
			out = append(out, [2]string{"outputs." + k, p.Outputs[k]})
		}
		return out
	}
	lastByName := map[string]string{}
	if last != nil {
		for _, kv := range flat(*last) {
			lastByName[kv[0]] = kv[1]
		}
	}
	var out []Component
	seen := map[string]bool{}
	for _, kv := range flat(cur) {
		seen[kv[0]] = true
		c := Component{Name: kv[0], Value: kv[1]}
		if last != nil {
			l, had := lastByName[kv[0]]
			c.Last, c.Differs = l, !had || l != kv[1]
		}
		out = append(out, c)
	}
	if last != nil { // parts the last run had and this one does not
		for _, kv := range flat(*last) {
			if !seen[kv[0]] {
				out = append(out, Component{Name: kv[0], Last: kv[1], Differs: true})
			}
		}
	}
	return out
}

// Run is an earlier run of a step that recorded a key.
type Run struct {
	Job  string // the pipeline job
	Step string
	// Outputs are the manifest digests of every output it registered.
	Outputs []string
	// Order orders runs: a larger Order is newer (its completion sequence).
	Order uint64
}

// Policy is how a step asks to be treated.
type Policy struct {
	// ForceRerun is the pipeline's settings.force_rerun, or `job rerun --force`.
	ForceRerun bool
	// Deterministic is the step's is_deterministic (default true).
	Deterministic bool
}

// Hit returns the run a step reuses: the newest of runs whose every output is present
// (present reports a manifest and all its blobs in the store with their digests), or
// false when the step must run: no key, a policy that asks to run, or no run whose outputs
// are all there.
func Hit(hasKey bool, policy Policy, runs []Run, present func(digest string) bool) (Run, bool) {
	if !hasKey || policy.ForceRerun || !policy.Deterministic {
		return Run{}, false
	}
	sorted := append([]Run(nil), runs...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Order > sorted[j].Order })
	for _, r := range sorted {
		ok := true
		for _, d := range r.Outputs {
			if !present(d) {
				ok = false
				break
			}
		}
		if ok {
			return r, true
		}
	}
	return Run{}, false
}

// ReusedFrom is how a reused step names the run it took its outputs from.
func (r Run) ReusedFrom() string { return r.Job + "/" + r.Step }
