//go:build unix

package drivertest

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/artifacts"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
)

// The checks of a task's files: inputs copied in, outputs created and fetched back.

// Inputs land in the working directory before the command starts, outputs exist empty,
// MLCOMPUTE_WORK_DIR names the working directory, and FetchOutput gives back the files the
// task wrote with the digests they had on the engine's machine.
func (s *suite) inputsAndOutputs(e *env) {
	node := e.readyNode(s.key("owner"))
	src := filepath.Join(e.t.TempDir(), "data")
	writeInputTree(e, src)
	store := e.artifactStore()
	want := e.localDigest(store, src)

	task := s.key("t")
	p := Program{CheckWorkDir: true, Copies: []Copy{{"in/data/.", "out/model"}, {"in/data/a.txt", "out/file/result.txt"}}}
	spec := driver.TaskSpec{Key: task, Command: p.Command(),
		Inputs:  []driver.TaskInput{{Src: src, Dest: "in/data"}},
		Outputs: []driver.TaskOutput{{Path: "out/model"}, {Path: "out/file/result.txt", File: true}, {Path: "out/empty"}}}
	if err := e.d.StartTask(e.ctx, node, spec); err != nil {
		e.t.Fatalf("StartTask(%s, %s) with inputs: %v", node, task, err)
	}
	if code := e.waitExit(node, task); code != 0 {
		e.t.Fatalf("the task exited %d (3: MLCOMPUTE_WORK_DIR is wrong, 4: an input or output is missing); output %q", code, e.output(node, task, 0))
	}

	got, err := e.fetch(store, node, task, "out/model", artifacts.TypeFolder)
	if err != nil {
		e.t.Fatalf("FetchOutput(out/model): %v", err)
	}
	if got.Digest != want.Digest {
		e.t.Fatalf("the output's digest %s differs from the input's %s:\noutput %+v\ninput  %+v", got.Digest, want.Digest, got.Manifest.Files, want.Manifest.Files)
	}
	file, err := e.fetch(store, node, task, "out/file/result.txt", artifacts.TypeFile)
	if err != nil {
		e.t.Fatalf("FetchOutput(out/file/result.txt): %v", err)
	}
	if f := file.Manifest.Files[0]; f.Path != "result.txt" || f.Digest != fileDigest(want.Manifest, "a.txt") {
		e.t.Fatalf("the file output is %+v, want result.txt with the digest of a.txt", f)
	}
	empty, err := e.fetch(store, node, task, "out/empty", artifacts.TypeFolder)
	if err != nil || empty.FileCount != 0 {
		e.t.Fatalf("FetchOutput(out/empty) = %+v, %v; want an empty output", empty, err)
	}
	if _, err := e.fetch(store, node, task, "out/nothing", artifacts.TypeFolder); !driver.IsNotFound(err) {
		e.t.Fatalf("FetchOutput of a path the task did not write: %v, want driver.ErrNotFound", err)
	}
	if _, err := e.fetch(store, node, task, "../escape", artifacts.TypeFolder); err == nil {
		e.t.Fatal("FetchOutput(../escape) succeeded")
	}
	if _, err := e.fetch(store, node, s.key("t"), "out", artifacts.TypeFolder); !driver.IsNotFound(err) {
		e.t.Fatalf("FetchOutput of an unknown task: %v, want driver.ErrNotFound", err)
	}
}

// A socket in an output fails the fetch, naming it (tar alone would skip it silently).
func (s *suite) outputSocketRefused(e *env) {
	node := e.readyNode(s.key("owner"))
	task := s.key("t")
	spec := driver.TaskSpec{Key: task, Command: Program{Socket: "out/listener.sock"}.Command(), Outputs: []driver.TaskOutput{{Path: "out"}}}
	if err := e.d.StartTask(e.ctx, node, spec); err != nil {
		e.t.Fatalf("StartTask(%s, %s): %v", node, task, err)
	}
	if code := e.waitExit(node, task); code != 0 {
		e.t.Fatalf("the task exited %d (5: it could not make a socket); output %q", code, e.output(node, task, 0))
	}
	_, err := e.fetch(e.artifactStore(), node, task, "out", artifacts.TypeFolder)
	if err == nil || !strings.Contains(err.Error(), "listener.sock") || !strings.Contains(err.Error(), "socket") {
		e.t.Fatalf("FetchOutput of an output holding a socket: %v, want an error naming out/listener.sock as a socket", err)
	}
}

// writeInputTree makes an input of nested directories, an executable, an empty file, a
// file of random bytes, a name beyond ASCII and a symlink to a file inside.
func writeInputTree(e *env, root string) {
	e.t.Helper()
	random := make([]byte, 300<<10)
	_, _ = rand.Read(random)
	files := []struct {
		name string
		body []byte
		mode os.FileMode
	}{
		{"a.txt", []byte("alpha\n"), 0o644},
		{"bin/run.sh", []byte("#!/bin/sh\necho run\n"), 0o755},
		{"deep/er/x.bin", random, 0o644},
		{"empty", nil, 0o644},
		{"naïve name.txt", []byte("utf-8\n"), 0o644},
	}
	for _, f := range files {
		p := filepath.Join(root, filepath.FromSlash(f.name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			e.t.Fatal(err)
		}
		if err := os.WriteFile(p, f.body, f.mode); err != nil {
			e.t.Fatal(err)
		}
	}
	if err := os.Symlink("../a.txt", filepath.Join(root, "deep", "a-link")); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) artifactStore() *artifacts.Store {
	e.t.Helper()
	store, err := artifacts.Open(filepath.Join(e.t.TempDir(), "artifacts"))
	if err != nil {
		e.t.Fatal(err)
	}
	return store
}

// localDigest takes a directory of this machine into store, as a task's output would be.
func (e *env) localDigest(store *artifacts.Store, dir string) *artifacts.Intake {
	e.t.Helper()
	rc := driver.StreamOutput(e.ctx, func(ctx context.Context, w io.Writer) error {
		return driver.WriteOutputTar(ctx, w, filepath.Dir(dir), filepath.Base(dir))
	})
	defer rc.Close()
	in, err := store.Intake(e.ctx, artifacts.TypeFolder, rc, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	in.Release()
	return in
}

// fetch takes a task's output into store: the error is FetchOutput's or the stream's.
func (e *env) fetch(store *artifacts.Store, node, task, rel, typ string) (*artifacts.Intake, error) {
	rc, err := e.d.FetchOutput(e.ctx, node, task, rel)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	in, err := store.Intake(e.ctx, typ, rc, 0)
	if err != nil {
		return nil, err
	}
	in.Release()
	if err := store.Verify(e.ctx, in.Digest); err != nil {
		return nil, errors.Join(errors.New("the fetched output does not verify"), err)
	}
	return in, nil
}

func fileDigest(m artifacts.Manifest, path string) string {
	for _, f := range m.Files {
		if f.Path == path {
			return f.Digest
		}
	}
	return ""
}
