package catalog

import (
	"fmt"
	"strings"
)

// Reasons a SizeError gives.
const (
	ReasonUnknown     = "unknown"     // no such size in the catalog
	ReasonRetired     = "retired"     // Azure retired the size
	ReasonUnsupported = "unsupported" // the size cannot back the compute type asked for
)

// SizeError says why Resolve refused a size. Msg is written for users and names the way
// out: the data source or CLI listing sizes, a close match, the successor of a retired
// size, or the compute types the size does support.
type SizeError struct {
	Reason string // ReasonUnknown, ReasonRetired or ReasonUnsupported
	Size   string // canonical spelling when the size is known, else as given
	Msg    string
	// Suggestion is the size to use instead, when there is one: the successor of a
	// retired size, or a close match for an unknown one.
	Suggestion string
}

func (e *SizeError) Error() string { return e.Msg }

// Resolve checks that a size can be used for compute type t and returns it canonically
// spelled. An empty t skips the compute-type check. Every error is a *SizeError:
//
//	unknown:     unknown VM size "Standard_NC6s_v4"; see the mlcompute_vm_sizes data source or 'mlcompute sizes list' (did you mean "Standard_NC6s_v3"?)
//	retired:     VM size "Standard_NC6" was retired on 2023-08-31; use "Standard_NC4as_T4_v3" instead
//	unsupported: VM size "Standard_M128ms" does not support OnlineDeployment; it supports ComputeCluster, ComputeInstance
func Resolve(name string, t ComputeType) (Size, error) {
	s, ok := Lookup(name)
	if !ok {
		return Size{}, unknownSize(name)
	}
	if s.Retired() {
		return Size{}, &SizeError{
			Reason:     ReasonRetired,
			Size:       s.Name,
			Suggestion: s.Successor,
			Msg:        fmt.Sprintf("VM size %q was retired on %s; use %q instead", s.Name, s.RetiredOn, s.Successor),
		}
	}
	if t == "" {
		return s, nil
	}
	if !t.Valid() {
		return Size{}, &SizeError{
			Reason: ReasonUnsupported,
			Size:   s.Name,
			Msg:    fmt.Sprintf("unknown compute type %q; expected one of %s", t, joinTypes(ComputeTypes())),
		}
	}
	if !s.Supports(t) {
		return Size{}, &SizeError{
			Reason: ReasonUnsupported,
			Size:   s.Name,
			Msg:    fmt.Sprintf("VM size %q does not support %s; it supports %s", s.Name, t, joinTypes(s.SupportedComputeTypes)),
		}
	}
	return s, nil
}

func unknownSize(name string) *SizeError {
	const where = "see the mlcompute_vm_sizes data source or 'mlcompute sizes list'"
	e := &SizeError{Reason: ReasonUnknown, Size: name}
	if strings.TrimSpace(name) == "" {
		e.Msg = "VM size must not be empty; " + where
		return e
	}
	e.Msg = fmt.Sprintf("unknown VM size %q; %s", name, where)
	if e.Suggestion = Suggest(name); e.Suggestion != "" {
		e.Msg += fmt.Sprintf(" (did you mean %q?)", e.Suggestion)
	}
	return e
}

func joinTypes(ts []ComputeType) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = string(t)
	}
	return strings.Join(parts, ", ")
}

// Suggest returns the catalog size closest to an unknown name, or "" when none is close.
// A name missing its "Standard_" prefix is matched with it. Otherwise the nearest name by
// case-insensitive edit distance wins, if within a quarter of the length of the name
// without its prefix (at least 1); a name given without a prefix is compared with the
// catalog's names without theirs. Ties go to current sizes over retired ones, then to the
// first name in order.
func Suggest(name string) string {
	key := strings.ToLower(strings.TrimSpace(name))
	if key == "" {
		return ""
	}
	if s, ok := Lookup(key); ok { // only spaces around it
		return s.Name
	}
	bare, hasPrefix := stripPrefix(key)
	if !hasPrefix {
		if s, ok := Lookup("standard_" + key); ok {
			return s.Name
		}
	}
	limit := max(1, len(bare)/4)
	best, bestDist, bestRetired := "", limit+1, false
	for _, s := range cat().sizes {
		candidate := strings.ToLower(s.Name)
		if !hasPrefix {
			candidate, _ = stripPrefix(candidate)
		}
		d := editDistance(key, candidate, limit)
		if d > limit {
			continue
		}
		if d < bestDist || (d == bestDist && bestRetired && !s.Retired()) {
			best, bestDist, bestRetired = s.Name, d, s.Retired()
		}
	}
	return best
}

// stripPrefix removes the tier prefix of a lower-cased size name.
func stripPrefix(key string) (string, bool) {
	for _, p := range []string{"standard_", "basic_"} {
		if rest, ok := strings.CutPrefix(key, p); ok {
			return rest, true
		}
	}
	return key, false
}

// editDistance is the Levenshtein distance between a and b, or limit+1 when it exceeds
// limit. The names are ASCII, so bytes stand for characters.
func editDistance(a, b string, limit int) int {
	if d := len(a) - len(b); d > limit || -d > limit {
		return limit + 1
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			rowMin = min(rowMin, cur[j])
		}
		if rowMin > limit {
			return limit + 1
		}
		prev, cur = cur, prev
	}
	return min(prev[len(b)], limit+1)
}
