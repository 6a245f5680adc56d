package cli

import (
	"bytes"
	"strings"
	"testing"
)

// The provider binary's `engine --help` shows usage lines a user can type: with "engine".
func TestEngineUsageLine(t *testing.T) {
	top, args := withProgram(NewRootCommand(Config{Use: "terraform-provider-mlcompute engine", Version: "test"}), []string{"job", "--help"})
	var out bytes.Buffer
	top.SetOut(&out)
	top.SetArgs(args)
	if err := top.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "terraform-provider-mlcompute engine job [command]") {
		t.Fatalf("usage of `engine job --help`:\n%s\nwant the line to start with \"terraform-provider-mlcompute engine job\"", out.String())
	}
}
