package model

import (
	"archive/tar"
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/artifacts"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/reuse"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store/storetest"
)

// folder takes a one-file folder into the artifacts store and returns its manifest digest.
func folder(t *testing.T, a *artifacts.Store, name, body string) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write([]byte(body)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	in, err := a.Intake(context.Background(), api.URIFolder, &buf, 0)
	if err != nil {
		t.Fatal(err)
	}
	in.Release()
	return in.Digest
}

// A hit is the newest recorded run of the key whose every output verifies in the
// artifacts store; once a blob of that run is gone the older run is taken, once none is
// whole the step runs, and force_rerun or is_deterministic: false run it whatever the
// index holds. Runs of another key or workspace are not seen.
func TestReuseIndexHitNeedsEveryOutputVerified(t *testing.T) {
	st := storetest.Open(t, t.TempDir())
	a, err := artifacts.Open(filepath.Join(t.TempDir(), "artifacts"))
	if err != nil {
		t.Fatal(err)
	}
	old := []string{folder(t, a, "model.bin", "old weights"), folder(t, a, "metrics.json", "{}")}
	young := []string{folder(t, a, "model.bin", "new weights"), folder(t, a, "metrics.json", "{}")}
	const key = "sha256:1111"
	err = st.Update(func(tx *store.Tx) error {
		if err := PutReuseRun(tx, "ws", key, reuse.Run{Job: "pipe-1", Step: "train", Outputs: old}); err != nil {
			return err
		}
		if err := PutReuseRun(tx, "ws", key, reuse.Run{Job: "pipe-2", Step: "train", Outputs: young}); err != nil {
			return err
		}
		if err := PutReuseRun(tx, "other", key, reuse.Run{Job: "pipe-9", Step: "train", Outputs: young}); err != nil {
			return err
		}
		return PutReuseRun(tx, "ws", "sha256:2222", reuse.Run{Job: "pipe-3", Step: "train", Outputs: young})
	})
	if err != nil {
		t.Fatal(err)
	}
	hit := func(policy reuse.Policy) (string, bool) {
		t.Helper()
		var runs []reuse.Run
		if err := st.View(func(tx *store.Tx) (err error) { runs, err = ReuseRuns(tx, "ws", key); return err }); err != nil {
			t.Fatal(err)
		}
		if len(runs) != 2 {
			t.Fatalf("runs of the key in ws: %+v", runs)
		}
		present := func(d string) bool { return a.Verify(context.Background(), d) == nil }
		r, ok := reuse.Hit(true, policy, runs, present)
		return r.ReusedFrom(), ok
	}
	normal := reuse.Policy{Deterministic: true}
	if from, ok := hit(normal); !ok || from != "pipe-2/train" {
		t.Fatalf("hit = %q, %v; want the newer run pipe-2/train", from, ok)
	}
	if _, ok := hit(reuse.Policy{Deterministic: true, ForceRerun: true}); ok {
		t.Fatal("force_rerun reused a run")
	}
	if _, ok := hit(reuse.Policy{}); ok {
		t.Fatal("is_deterministic: false reused a run")
	}

	// The newer run's model output (its manifest and its weights' blob) is collected: it no
	// longer verifies.
	if _, _, err := a.Collect(append(old, young[1])); err != nil {
		t.Fatal(err)
	}
	if from, ok := hit(normal); !ok || from != "pipe-1/train" {
		t.Fatalf("after collecting pipe-2's model, hit = %q, %v; want pipe-1/train", from, ok)
	}
	if _, _, err := a.Collect(nil); err != nil {
		t.Fatal(err)
	}
	if from, ok := hit(normal); ok {
		t.Fatalf("with every blob gone, hit %q", from)
	}
}
