package slurm

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// waitLimit bounds each wait of the tests: a job starts within a second or two.
const waitLimit = 30 * time.Second

// newTestDriver returns a driver of a fresh engine id on the cluster SLURM_CONF names, with
// its workdir in a temporary directory; closed when t ends.
func newTestDriver(t *testing.T, cfg Config) *Driver {
	t.Helper()
	if cfg.EngineID == "" {
		cfg.EngineID = NewEngineID()
	}
	if cfg.Workdir == "" {
		cfg.Workdir = t.TempDir()
	}
	if testing.Verbose() {
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: testWriter{t}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	d, err := New(ctx, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
