package provider

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/enginetest/scorer"
)

// The online endpoint's acceptance tests need a real model server: the test binary is one
// (package enginetest/scorer) when started as `provider.test test-scorer` (TestMain), so
// the tests need no Python.

const testScorerArg = "test-scorer"

// scoreReply is the part of the scorer's answer to POST /score the tests compare: which
// deployment, which version of it ($SCORER_VERSION) and which code (./VERSION) served.
type scoreReply struct {
	Deployment string `json:"deployment"`
	Version    string `json:"version"`
	Code       string `json:"code"`
	Model      string `json:"model,omitempty"`
}

// testScorerCommand is the HCL list that starts the test scorer.
func testScorerCommand(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("[%q, %q]", exe, testScorerArg)
}

// serveTestScorer runs the scorer until the engine stops the instance.
func serveTestScorer() int {
	if err := scorer.Serve(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
