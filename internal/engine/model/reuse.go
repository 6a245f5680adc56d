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
