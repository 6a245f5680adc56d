//go:build unix

package main

// -mode artifacts (also part of -mode all) times the engine's store of job outputs
// (internal/engine/artifacts) on a tree of -artifact-files files and -artifact-bytes bytes
// of random content, against `cp -r` of the same tree in the same run:
//
//   - intake: the local driver's FetchOutput stream (driver.WriteOutputTar through a pipe)
//     taken into a fresh store: hashing, writing each blob, one syncfs;
//   - download: the store's tar stream (WriteTar) extracted by `tar -x`, as a download;
//   - the two together, against one `cp -r`;
//   - a repeat intake of the same tree, which must store 0 new bytes;
//   - the bench process's peak RSS growth over the intake and the download.
//
// The ratios are throughput ratios, cp's time over ours: 1.00x is as fast as cp -r.

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/artifacts"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/artifacts/artifactstest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
)

type artifactRun struct {
	cp, intake, download, repeat time.Duration
	repeatStored                 int64
	rssGrowth                    int64
}

func runArtifacts(ctx context.Context, o options) error {
	dir, err := os.MkdirTemp("", "mlcompute-bench-artifacts-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, "tree")
	fmt.Printf("==> artifacts: writing a tree of %d files, %d MiB\n", o.artifactFiles, o.artifactBytes>>20)
	if err := artifactstest.WriteRandomTree(src, o.artifactFiles, o.artifactBytes); err != nil {
		return err
	}
	var runs []artifactRun
	for i := range o.artifactRuns {
		r, err := artifactRunOnce(ctx, dir, src, i)
		if err != nil {
			return err
		}
		runs = append(runs, r)
		fmt.Printf("    run %d: cp -r %.2fs, intake %.2fs, download %.2fs, repeat %.2fs (stored %d bytes), RSS +%d MiB\n",
			i+1, r.cp.Seconds(), r.intake.Seconds(), r.download.Seconds(), r.repeat.Seconds(), r.repeatStored, r.rssGrowth>>20)
	}
	pick := func(f func(artifactRun) time.Duration) []time.Duration {
		var out []time.Duration
		for _, r := range runs {
			out = append(out, f(r))
		}
		return out
	}
	cp := pick(func(r artifactRun) time.Duration { return r.cp })
	both := pick(func(r artifactRun) time.Duration { return r.intake + r.download })
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "\nartifacts, %d files, %d MiB, %d runs\tmedian\tthroughput to cp -r (median [range])\n", o.artifactFiles, o.artifactBytes>>20, len(runs))
	fmt.Fprintf(w, "cp -r (baseline)\t%.2fs\t\n", median(cp).Seconds())
	for _, row := range []struct {
		name string
		ds   []time.Duration
	}{
		{"intake (local FetchOutput stream)", pick(func(r artifactRun) time.Duration { return r.intake })},
		{"download (WriteTar | tar -x)", pick(func(r artifactRun) time.Duration { return r.download })},
		{"intake + download", both},
		{"repeat intake", pick(func(r artifactRun) time.Duration { return r.repeat })},
	} {
		inv := ratios(cp, row.ds)
		fmt.Fprintf(w, "%s\t%.2fs\t%.2fx [%.2f-%.2f]\n", row.name, median(row.ds).Seconds(), medianFloat(inv), slices.Min(inv), slices.Max(inv))
	}
	w.Flush()
	var growth, stored []int64
	for _, r := range runs {
		growth = append(growth, r.rssGrowth>>20)
		stored = append(stored, r.repeatStored)
	}
	fmt.Printf("peak RSS growth over intake and download: %v MiB (target < 64)\n", growth)
	fmt.Printf("bytes a repeat intake stored: %v (target 0)\n", stored)
	return nil
}

func artifactRunOnce(ctx context.Context, dir, src string, i int) (artifactRun, error) {
	var r artifactRun
	cpDst := filepath.Join(dir, "cp")
	start := time.Now()
	if out, err := exec.CommandContext(ctx, "cp", "-r", src, cpDst).CombinedOutput(); err != nil {
		return r, fmt.Errorf("cp -r: %v: %s", err, out)
	}
	r.cp = time.Since(start)
	if err := os.RemoveAll(cpDst); err != nil {
		return r, err
	}

	store, err := artifacts.Open(filepath.Join(dir, "store"+strconv.Itoa(i)))
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(store.Dir())
	runtime.GC()
	before := procStatusKB("VmRSS")
	resetPeakRSS()

	start = time.Now()
	in, err := intakeTree(ctx, store, src)
	if err != nil {
		return r, err
	}
	r.intake = time.Since(start)
	in.Release()

	dlDst := filepath.Join(dir, "download")
	if err := os.Mkdir(dlDst, 0o755); err != nil {
		return r, err
	}
	start = time.Now()
	if err := downloadTree(ctx, store, in.Digest, dlDst); err != nil {
		return r, err
	}
	r.download = time.Since(start)
	r.rssGrowth = (procStatusKB("VmHWM") - before) << 10
	if err := os.RemoveAll(dlDst); err != nil {
		return r, err
	}

	start = time.Now()
	again, err := intakeTree(ctx, store, src)
	if err != nil {
		return r, err
	}
	r.repeat = time.Since(start)
	again.Release()
	if again.Digest != in.Digest {
		return r, fmt.Errorf("a repeat intake has digest %s, the first %s", again.Digest, in.Digest)
	}
	r.repeatStored = again.StoredBytes
	return r, nil
}

func intakeTree(ctx context.Context, store *artifacts.Store, src string) (*artifacts.Intake, error) {
	rc := driver.StreamOutput(ctx, func(ctx context.Context, w io.Writer) error {
		return driver.WriteOutputTar(ctx, w, filepath.Dir(src), filepath.Base(src))
	})
	defer rc.Close()
	return store.Intake(ctx, artifacts.TypeFolder, rc, 0)
}

func downloadTree(ctx context.Context, store *artifacts.Store, digest, dst string) error {
	cmd := exec.CommandContext(ctx, "tar", "-x", "-f", "-", "-C", dst)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	werr := store.WriteTar(ctx, stdin, digest)
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("tar -x: %v: %s", err, stderr.String())
	}
	return werr
}

// resetPeakRSS resets the process's VmHWM to its current RSS (Linux clear_refs 5).
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// procStatusKB reads a kB field of /proc/self/status.
func procStatusKB(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
