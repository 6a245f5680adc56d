//go:build unix

package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// The crash suite's round for the intake of a job's output (DESIGN 6): "killed mid-intake,
// the job ends Completed with its whole output or Failed with nothing, and the next
// collection leaves no orphaned blob". The kill is timed by what the intake leaves on
// disk in the engine's store, never by a sleep: its tmp/ filling with the blobs it
// writes, the first blob named under blobs/, and tmp/ empty again once it committed.

const (
	intakeFiles = 3000 // the output's files; every seventh repeats an earlier one's content
	intakeJob   = "intake"
)

// intakePhase is the moment of the intake the engine dies in.
type intakePhase struct {
	name string
	// reached reports, from the store's directory, that the intake is at this moment;
	// threshold is the round's random number of tmp files to wait for.
	reached func(st storeView, threshold int) bool
}

var intakePhases = []intakePhase{
	// Files stream in: each new content is a file in tmp/, not yet named.
	{"streaming", func(st storeView, threshold int) bool { return st.tmp >= threshold }},
	// The blobs are being named: the first rename made a fan-out directory in blobs/.
	{"naming", func(st storeView, _ int) bool { return st.named }},
	// The intake committed (tmp/ empty, blobs named); the job's write may or may not have
	// followed.
	{"committed", func(st storeView, _ int) bool { return st.named && st.tmp == 0 }},
}

// storeView is what a poll sees of the store's directory.
type storeView struct {
	tmp   int  // entries in tmp/ (up to the count asked for)
	named bool // blobs/ holds a fan-out directory
}

func (r *crashRound) viewStore(atLeast int) storeView {
	art := filepath.Join(r.home, "artifacts")
	var v storeView
	if f, err := os.Open(filepath.Join(art, "tmp")); err == nil {
		names, _ := f.Readdirnames(max(atLeast, 1))
		v.tmp = len(names)
		f.Close()
	}
	if f, err := os.Open(filepath.Join(art, "blobs")); err == nil {
		names, _ := f.Readdirnames(1)
		v.named = len(names) > 0
		f.Close()
	}
	return v
}

// crashDuringIntake: the engine dies while it takes a job's output of a few thousand
// files into its store (while the files stream in, while their blobs are named, or just
// after it committed), and in half the rounds the next engine dies again in the intake it
// redoes. The job ends Completed with its whole output (downloaded byte for byte; the CLI
// recomputes every digest) or Failed with nothing registered; after the next collection
// the store holds exactly the blobs of the registered output (none if it failed), and
// tmp/ is empty.
func crashDuringIntake(r *crashRound) {
	r.writeConfig(crashConfig(false, "", 0))
	r.mustTerraform("apply", "-auto-approve")
	src := filepath.Join(r.workDir, "model")
	want := r.writeIntakeTree(src)
	yaml := filepath.Join(r.workDir, "intake.yaml")
	body := fmt.Sprintf("type: command\nname: %s\ncompute: azureml:warm\ncommand: cp -R %s/. ${{outputs.model}}/\noutputs:\n  model:\n    type: uri_folder\n", intakeJob, src)
	if err := os.WriteFile(yaml, []byte(body), 0o600); err != nil {
		r.t.Fatal(err)
	}
	if out, code := r.cli("job", "submit", "--workspace", "crash", "-f", yaml); code != 0 {
		r.t.Fatalf("submit: %s", out)
	}

	phase := intakePhases[r.rng.IntN(len(intakePhases))]
	threshold := 1 + r.rng.IntN(intakeFiles/2)
	if !r.killAtIntake(phase, threshold, 120*time.Second) {
		r.t.Fatalf("the intake of job %s's output never reached %q (threshold %d) within 120s", intakeJob, phase.name, threshold)
	}
	r.killedMidOperation = true
	if r.rng.IntN(2) == 0 {
		// The next engine takes the output in again (the exit was not recorded): kill it
		// there too, unless the job had ended before the first kill.
		r.wake()
		// Only tmp/ filling says so: blobs/ may hold what the first intake named.
		if r.killAtIntake(intakePhases[0], 1+r.rng.IntN(intakeFiles/4), 60*time.Second) {
			r.t.Logf("killed again in the redone intake")
		}
	}
	r.wake()

	var job api.Job
	r.waitFor("job "+intakeJob+" finished", 120*time.Second, func() bool {
		j, err := r.client().GetJob(context.Background(), "crash", intakeJob)
		if err != nil {
			return false
		}
		job = *j
		return api.Terminal(j.Status)
	})
	out := job.Outputs["model"]
	referenced := map[string]bool{}
	switch job.Status {
	case api.JobCompleted:
		if !strings.HasPrefix(out.Digest, "sha256:") || out.FileCount != int64(len(want)) {
			r.t.Fatalf("job %s Completed with output %+v; want its %d files registered", intakeJob, out, len(want))
		}
		referenced = r.checkDownload(want)
		referenced[strings.TrimPrefix(out.Digest, "sha256:")] = true // the manifest
		r.t.Logf("job %s Completed with its whole output (%d files, %s)", intakeJob, out.FileCount, out.Digest)
	case api.JobFailed:
		if out.Digest != "" || out.Size != 0 || out.FileCount != 0 {
			r.t.Fatalf("job %s Failed with output %+v registered; want nothing", intakeJob, out)
		}
		if _, code := r.cli("job", "download", "--workspace", "crash", intakeJob, "--download-path", r.t.TempDir()); code == 0 {
			r.t.Fatalf("job %s Failed, yet its output downloads", intakeJob)
		}
		r.t.Logf("job %s Failed with nothing registered: %s", intakeJob, job.Error)
	default:
		r.t.Fatalf("job %s ended %s; want Completed or Failed", intakeJob, job.Status)
	}

	// The next collection: deleting a finished job collects at once, before it answers.
	probe, code := r.cli("job", "submit", "--workspace", "crash", "--compute", "warm", "--", "true")
	if code != 0 {
		r.t.Fatalf("submit: %s", probe)
	}
	probe = strings.TrimSpace(probe)
	r.waitFor("job "+probe+" finished", 60*time.Second, func() bool {
		j, err := r.client().GetJob(context.Background(), "crash", probe)
		return err == nil && api.Terminal(j.Status)
	})
	if out, code := r.cli("job", "delete", "--workspace", "crash", probe); code != 0 {
		r.t.Fatalf("job delete %s: %s", probe, out)
	}
	r.checkStoreHoldsExactly(referenced)

	plan, code := r.terraform("plan", "-detailed-exitcode")
	if code != 0 {
		r.t.Fatalf("a plan after the crash is not empty (exit %d):\n%s", code, plan)
	}
	r.checkStateMatchesEngine()
	r.checkClustersAtMinimum("crash", crashMinimums)
}

// killAtIntake polls the store until the intake reaches phase, then SIGKILLs the engine
// and waits for the next one (in serve mode the test starts it; in embedded mode the
// next CLI call does). It reports false, killing nothing, when limit passes first or when
// the job ended.
func (r *crashRound) killAtIntake(phase intakePhase, threshold int, limit time.Duration) bool {
	r.t.Helper()
	deadline := time.Now().Add(limit)
	lastStatus := time.Now()
	for time.Now().Before(deadline) {
		if phase.reached(r.viewStore(threshold), threshold) {
			pid := r.enginePID()
			<-r.crash()
			r.t.Logf("engine %d killed with the intake %s (threshold %d)", pid, phase.name, threshold)
			return true
		}
		if time.Since(lastStatus) > time.Second {
			lastStatus = time.Now()
			if j, err := r.client().GetJob(context.Background(), "crash", intakeJob); err == nil && api.Terminal(j.Status) {
				r.t.Logf("job %s %s before the intake reached %q", intakeJob, j.Status, phase.name)
				return false
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	return false
}

// writeIntakeTree writes the job's output-to-be: intakeFiles files of 1 to 16 KiB in 30
// directories, from the round's random source, every seventh a copy of an earlier one
// (stored once). It returns each file's content by its relative path.
func (r *crashRound) writeIntakeTree(root string) map[string][]byte {
	r.t.Helper()
	want := map[string][]byte{}
	var names []string
	for i := range intakeFiles {
		name := fmt.Sprintf("shard-%02d/part-%05d.bin", i%30, i)
		var content []byte
		if i%7 == 6 {
			content = want[names[r.rng.IntN(len(names))]]
		} else {
			content = make([]byte, 1024+r.rng.IntN(15*1024))
			for j := range content {
				content[j] = byte(r.rng.Uint32())
			}
		}
		want[name] = content
		names = append(names, name)
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(name)), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, name), content, 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
	return want
}

// checkDownload downloads the job's output, compares it with want file by file, and
// returns the blob names its files need (the sha256 of each distinct content).
func (r *crashRound) checkDownload(want map[string][]byte) map[string]bool {
	r.t.Helper()
	dl := r.t.TempDir()
	if out, code := r.cli("job", "download", "--workspace", "crash", intakeJob, "--output-name", "model", "--download-path", dl); code != 0 {
		r.t.Fatalf("job download exited %d:\n%s", code, out)
	}
	root := filepath.Join(dl, "named-outputs", "model")
	got := 0
	blobs := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		content, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if w, ok := want[filepath.ToSlash(rel)]; !ok || !bytes.Equal(content, w) {
			return fmt.Errorf("downloaded %s is not what the job wrote (%d bytes, known %v)", rel, len(content), ok)
		}
		sum := sha256.Sum256(content)
		blobs[hex.EncodeToString(sum[:])] = true
		got++
		return nil
	})
	if err != nil {
		r.t.Fatal(err)
	}
	if got != len(want) {
		r.t.Fatalf("downloaded %d files; the job wrote %d", got, len(want))
	}
	return blobs
}

// checkStoreHoldsExactly checks that the store's blobs are exactly the names given (no
// orphan, nothing missing) and that tmp/ is empty.
func (r *crashRound) checkStoreHoldsExactly(want map[string]bool) {
	r.t.Helper()
	art := filepath.Join(r.home, "artifacts")
	var orphans []string
	found := 0
	err := filepath.WalkDir(filepath.Join(art, "blobs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if want[d.Name()] {
			found++
		} else {
			orphans = append(orphans, d.Name())
		}
		return nil
	})
	if err != nil {
		r.t.Fatal(err)
	}
	slices.Sort(orphans)
	if len(orphans) > 0 || found != len(want) {
		r.t.Fatalf("after the collection the store holds %d of the %d blobs the registered output references, and %d orphans: %v",
			found, len(want), len(orphans), orphans[:min(len(orphans), 5)])
	}
	tmp, err := os.ReadDir(filepath.Join(art, "tmp"))
	if err != nil || len(tmp) != 0 {
		r.t.Fatalf("the store's tmp/ holds %d entries after the collection (%v); want none", len(tmp), err)
	}
	r.t.Logf("the store holds exactly the %d blobs the registered output references", found)
}
