//go:build unix && !linux

package e2e

import "testing"

// startContainerd fails: the container tests run on Linux, where containerd does.
func startContainerd(t *testing.T) string {
	t.Fatal("container images run on Linux nodes only")
	return ""
}

// crashDuringContainerJobs fails as startContainerd does.
func crashDuringContainerJobs(r *crashRound) { startContainerd(r.t) }
