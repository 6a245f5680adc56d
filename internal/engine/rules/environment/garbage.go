package environment

import (
	"regexp"
	"slices"
)

// cacheName matches the names CacheName makes; nothing else in a cache is ever collected.
var cacheName = regexp.MustCompile(`^[0-9a-f]{16}$`)

// Garbage decides which builds of a cache are no longer needed: of the cache names found
// there (cached), those that are not the cache name of any hash in use. A hash is in use
// while an environment record has it, a job that is not finished was submitted with it, or
// an endpoint deployment or instance runs in it. Names that CacheName cannot have made are
// never garbage. The result is sorted and without repeats.
func Garbage(cached, inUse []string) []string {
	keep := map[string]bool{}
	for _, h := range inUse {
		keep[CacheName(h)] = true
	}
	var out []string
	for _, name := range cached {
		if cacheName.MatchString(name) && !keep[name] {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// UnusedImages decides which of the environment images imported on a machine (by content
// hash) are no longer needed: those whose hash is not in use, as Garbage reads "in use".
// The result is sorted and without repeats.
func UnusedImages(imported, inUse []string) []string {
	var out []string
	for _, h := range imported {
		if !slices.Contains(inUse, h) {
			out = append(out, h)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
