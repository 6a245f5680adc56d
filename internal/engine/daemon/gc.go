package daemon

import (
	"os"
	"runtime/debug"
)

// GCPercent is the garbage collector's pace in an engine process (mlcompute serve, and
// the embedded engine, which is the same command). The engine's heap is small (the store
// lives in bbolt's memory map), while each scoring request allocates a few kilobytes: at
// Go's default pace (100) a loaded router collects many times a second for a heap that
// hardly changes. At 400 the heap may grow to five times what is live, a few tens of
// megabytes, and collections under scoring load are a quarter as frequent
// (tools/bench -mode router measures the router with this pace). The provider's processes
// take it too: each lives for one terraform command on a heap of a few megabytes.
const GCPercent = 400

// SetGCPace sets GCPercent, unless the user chose a pace with GOGC.
func SetGCPace() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(GCPercent)
	}
}
