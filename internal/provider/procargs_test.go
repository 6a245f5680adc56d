package provider

import (
	"encoding/binary"
	"slices"
	"testing"
)

// procArgs2 builds a kern.procargs2 buffer as macOS lays it out.
func procArgs2(exe string, args []string, env []string) []byte {
	buf := binary.LittleEndian.AppendUint32(nil, uint32(len(args)))
	buf = append(buf, exe...)
	buf = append(buf, 0, 0, 0, 0) // the path's NUL and the alignment padding
	for _, a := range append(slices.Clone(args), env...) {
		buf = append(append(buf, a...), 0)
	}
	return buf
}

func TestParseProcArgs2(t *testing.T) {
	args := []string{"terraform", "-chdir=infra", "apply", "-destroy", ""}
	got, err := parseProcArgs2(procArgs2("/opt/homebrew/bin/terraform", args, []string{"HOME=/Users/me", "TF_CLI_ARGS=-destroy"}))
	if err != nil || !slices.Equal(got, args) {
		t.Fatalf("parsed %q, %v; want %q and no environment", got, err, args)
	}
	if !destroyCommand(got[1:], func(string) string { return "" }) {
		t.Fatal("the parsed command line is not seen as a destroy")
	}
	for name, raw := range map[string][]byte{
		"empty":           nil,
		"no path end":     binary.LittleEndian.AppendUint32(nil, 1),
		"arguments short": procArgs2("/bin/terraform", []string{"terraform"}, nil)[:20],
	} {
		if _, err := parseProcArgs2(raw); err == nil {
			t.Errorf("%s: parsed without an error", name)
		}
	}
}
