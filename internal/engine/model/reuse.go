package model

import (
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/reuse"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// PutReuseRun records in the reuse index that a step run completed with key and
// registered the outputs run.Outputs (manifest digests): in the write that completes the
// step. Its Order is set here, from the index's sequence, so a later completion is newer.
// A step run with force_rerun or is_deterministic: false is recorded too: its results
// stay reusable.
func PutReuseRun(tx *store.Tx, workspace, key string, run reuse.Run) error {
	seq, err := tx.NextSequence(store.ReuseIndex)
	if err != nil {
		return err
	}
	run.Order = seq
	return tx.Put(store.ReuseIndex, workspace+"/"+key+"/"+run.Job+"/"+run.Step, run)
}

// ReuseRuns lists the recorded runs of key in workspace.
func ReuseRuns(tx *store.Tx, workspace, key string) ([]reuse.Run, error) {
	var out []reuse.Run
	for _, k := range tx.Keys(store.ReuseIndex, workspace+"/"+key+"/") {
		var r reuse.Run
		ok, err := tx.Get(store.ReuseIndex, k, &r)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// Flight is the run of a reuse key in progress (single flight): the step job that runs it,
// and the pipelines with a step of the same key that wait for its end.
type Flight struct {
	Pipeline string   `json:"pipeline"`
	Step     string   `json:"step"`
	Job      string   `json:"job"`
	Waiters  []string `json:"waiters,omitempty"`
}

// GetFlight returns the run of key in progress in workspace, if any.
func GetFlight(tx *store.Tx, workspace, key string) (Flight, bool) {
	var f Flight
	ok, err := tx.Get(store.ReuseInFlight, workspace+"/"+key, &f)
	return f, ok && err == nil
}

// PutFlight records the run of key in progress.
func PutFlight(tx *store.Tx, workspace, key string, f Flight) error {
	return tx.Put(store.ReuseInFlight, workspace+"/"+key, f)
}

// EndFlight removes the run of key in progress when job is the one running it, and wakes
// the pipelines that waited for it (a marker each, as a step's end leaves): in the write
// in which the step's end is taken in.
func EndFlight(tx *store.Tx, workspace, key, job string) error {
	f, ok := GetFlight(tx, workspace, key)
	if !ok || f.Job != job {
		return nil
	}
	for _, w := range f.Waiters {
		if err := tx.Put(store.PipelineWakes, workspace+"/"+w+"/"+key, key); err != nil {
			return err
		}
	}
	return tx.Delete(store.ReuseInFlight, workspace+"/"+key)
}
