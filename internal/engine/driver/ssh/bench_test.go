//go:build unix

package ssh

import (
	"context"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/artifacts"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/artifacts/artifactstest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/ssh/sshtest"
)

var (
	benchFiles = flag.Int("artifact.files", 10000, "files in BenchmarkOutputOverSSH's tree")
	benchBytes = flag.Int64("artifact.bytes", 1<<30, "bytes in BenchmarkOutputOverSSH's tree")
	benchRuns  = flag.Int("artifact.runs", 3, "interleaved runs of BenchmarkOutputOverSSH")
)

// BenchmarkOutputOverSSH times an ended task's output taken into the store over SSH
// (TaskStore.FetchStream into artifacts.Store.Intake) against `ssh HOST tar -c | tar -x`
// of the same tree with OpenSSH's client, on the SSH tests' host in its network
// namespace, interleaved run by run. It prints throughput ratios (tar over ssh's time
// over ours; above 1.00x is faster) and asserts nothing about time. Run it with
// -benchtime=1x: each run moves the whole tree.
func BenchmarkOutputOverSSH(b *testing.B) {
	if _, err := exec.LookPath("ssh"); err != nil {
		b.Fatalf("the OpenSSH client (ssh) is needed for the baseline: %v", err)
	}
	h := sshtest.Start(b)
	ctx := context.Background()
	// The task: its directory records an exit code and a working directory in the
	// user's home, holding the tree, as the wrapper leaves them.
	tasks := filepath.Join(h.Home, "bench-tasks")
	key := "bench-task"
	work := filepath.Join(h.Home, "bench-work")
	tree := filepath.Join(work, "out")
	if err := artifactstest.WriteRandomTree(tree, *benchFiles, *benchBytes); err != nil {
		b.Fatal(err)
	}
	for file, content := range map[string]string{"exit_code": "0\n", workDirFile: work + "\n"} {
		p := filepath.Join(tasks, key, file)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for _, root := range []string{tasks, work} {
		err := filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Chown(p, h.UID, -1)
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	c, err := Dial(ctx, Target{Address: h.Address, Port: h.Port, Username: h.User, PrivateKeyPEM: h.KeyPEM})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	store := TaskStore{Shell: c, Dir: tasks}
	keyFile := h.KeyFile(b)

	var base, ours []time.Duration
	b.ResetTimer()
	for i := range *benchRuns {
		dst := filepath.Join(b.TempDir(), "tar")
		if err := os.Mkdir(dst, 0o755); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		cmd := exec.Command("sh", "-c", `ssh -i "$1" -p "$2" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR "$3" tar -C "$4" -cf - . | tar -xf - -C "$5"`,
			"bench", keyFile, strconv.Itoa(h.Port), h.User+"@"+h.Address, tree, dst)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("tar over ssh: %v: %s", err, out)
		}
		base = append(base, time.Since(start))
		os.RemoveAll(dst)

		s, err := artifacts.Open(filepath.Join(b.TempDir(), "artifacts"))
		if err != nil {
			b.Fatal(err)
		}
		start = time.Now()
		rc := store.FetchStream(ctx, key, "out")
		in, err := s.Intake(ctx, artifacts.TypeFolder, rc, 0)
		rc.Close()
		if err != nil {
			b.Fatal(err)
		}
		ours = append(ours, time.Since(start))
		in.Release()
		os.RemoveAll(s.Dir())
		fmt.Printf("run %d: tar over ssh %.2fs, FetchOutput into the store %.2fs (%d files, %d bytes)\n",
			i+1, base[i].Seconds(), ours[i].Seconds(), in.FileCount, in.Size)
	}
	var r []float64
	for i := range base {
		r = append(r, base[i].Seconds()/ours[i].Seconds())
	}
	slices.Sort(r)
	fmt.Printf("output over SSH, throughput to tar over ssh: median %.2fx [%.2f-%.2f]\n", r[len(r)/2], r[0], r[len(r)-1])
}
