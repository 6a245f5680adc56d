package gnetlog

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestLinesKeepTheLoggerAndTheirLevel(t *testing.T) {
	var out bytes.Buffer
	l := New(hclog.New(&hclog.LoggerOptions{Name: "loops", Level: hclog.Debug, Output: &out}))
	l.Infof("loop %d started", 1)
	l.Warnf("slow %s", "read")
	l.Errorf("closed: %v", "EOF")
	l.Fatalf("gave up")
	got := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{"[DEBUG] loops: loop 1 started", "[WARN]  loops: slow read", "[ERROR] loops: closed: EOF", "[ERROR] loops: gave up"}
	if len(got) != len(want) {
		t.Fatalf("log lines %q, want %d", got, len(want))
	}
	for i := range want {
		if !strings.HasSuffix(got[i], want[i]) {
			t.Errorf("line %d = %q, want it to end %q", i, got[i], want[i])
		}
	}
}
