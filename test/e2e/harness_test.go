//go:build unix

// Package e2e runs the built binaries exactly as a user would: terraform with a dev_overrides
// CLI config drives the provider, which starts the embedded engine from its own binary; the
// mlcompute CLI talks to the same engine. It runs with the acceptance tests (TF_ACC=1).
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/daemon"
)

// requiredProviders opens every configuration: without it terraform would look for
// hashicorp/mlcompute, which the dev override does not cover.
const requiredProviders = `terraform {
  required_providers {
    mlcompute = { source = "mlcompute/mlcompute" }
  }
}
`

var (
	binDir    string // holds terraform-provider-mlcompute, mlcompute and the test scorer, built once (TestMain)
	terraform string
	// repoRoot is the repository's root: go test runs a package's tests in its directory.
	// (Not runtime.Caller's file: make test builds with -trimpath, which leaves it relative.)
	repoRoot = func() string {
		wd, err := os.Getwd()
		if err != nil {
			panic(err)
		}
		return filepath.Join(wd, "..", "..")
	}()
)

func TestMain(m *testing.M) {
	if os.Getenv("TF_ACC") == "" {
		fmt.Println("e2e: TF_ACC not set; these tests run with the acceptance tests (make testacc)")
		os.Exit(m.Run())
	}
	if err := setup(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e setup:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(binDir)
	os.Exit(code)
}

func setup() error {
	terraform = os.Getenv("TF_ACC_TERRAFORM_PATH")
	if terraform == "" {
		p, err := exec.LookPath("terraform")
		if err != nil {
			return fmt.Errorf("no terraform: set TF_ACC_TERRAFORM_PATH")
		}
		terraform = p
	}
	var err error
	if binDir, err = os.MkdirTemp("", "mlc-e2e-bin-"); err != nil {
		return err
	}
	root := repoRoot
	// One go build for the three (it links them at the same time): terraform-provider-mlcompute,
	// mlcompute and scorer, each named after its package's directory.
	// Static, as the release builds them (and make build): the scorer also runs in the
	// container tests' images, which hold no C library.
	args := append(append([]string{"build", "-trimpath"}, goBuildTags...), "-o", binDir+string(filepath.Separator), ".", "./cmd/mlcompute", "./test/e2e/scorer")
	cmd := exec.Command("go", args...)
	cmd.Dir, cmd.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building the provider, the CLI and the test scorer: %v\n%s", err, b)
	}
	for _, name := range []string{"terraform-provider-mlcompute", "mlcompute", "scorer"} {
		if _, err := os.Stat(filepath.Join(binDir, name)); err != nil {
			return fmt.Errorf("go build made no %s: %v", name, err)
		}
	}
	if len(goBuildTags) > 0 {
		// The build settings recorded in the provider say which process layer it runs.
		out, err := exec.Command("go", "version", "-m", filepath.Join(binDir, "terraform-provider-mlcompute")).CombinedOutput()
		if want := "-tags=" + goBuildTags[1]; err != nil || !strings.Contains(string(out), want) {
			return fmt.Errorf("the provider under test was not built with %s: %v\n%s", want, err, out)
		}
	}
	return nil
}

func requireAcc(t *testing.T) {
	t.Helper()
	if os.Getenv("TF_ACC") == "" {
		t.Skip("set TF_ACC=1 to run end-to-end tests")
	}
}

// user is one person's machine: a data dir, a Terraform working dir and a CLI config.
type user struct {
	t       *testing.T
	home    string // MLCOMPUTE_HOME
	workDir string
	env     []string
}

func newUser(t *testing.T) *user {
	t.Helper()
	requireAcc(t)
	// Short paths: the engine's unix socket lives in the data dir (108-byte limit).
	home, err := os.MkdirTemp("", "mlc-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	u := &user{t: t, home: home, workDir: t.TempDir()}
	rc := filepath.Join(u.workDir, "cli.tfrc")
	cfg := fmt.Sprintf("provider_installation {\n  dev_overrides {\n    \"mlcompute/mlcompute\" = %q\n  }\n  direct {}\n}\n", binDir)
	if err := os.WriteFile(rc, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	u.env = append(os.Environ(), "MLCOMPUTE_HOME="+home, "TF_CLI_CONFIG_FILE="+rc, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1")
	t.Cleanup(func() {
		if t.Failed() {
			u.logEngineTail()
		}
		// Deleting the data dir makes its engine exit at once: no engine outlives a test.
		pid := u.enginePID()
		os.RemoveAll(home)
		if pid > 0 {
			u.waitGone(pid, 15*time.Second)
		}
	})
	return u
}

// engineLogTail is how many lines of a failed test's engine log it prints: the end, where
// the failure is, since the data dir holding the log is deleted with the test.
const engineLogTail = 200

// engineLogRepeats is how many lines of one message the tail keeps: the router's warning
// for each failed request, say, would fill it and hide what led to them.
const engineLogRepeats = 5

// logEngineTail logs the end of the embedded engine's log, if it wrote one: its last
// lines, each message at most engineLogRepeats times, and how many of each were left out.
func (u *user) logEngineTail() {
	b, err := os.ReadFile(filepath.Join(u.home, daemon.LogFile))
	if err != nil {
		return
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	seen, left := map[string]int{}, map[string]int{}
	var kept []string
	for i := len(all) - 1; i >= 0 && len(kept) < engineLogTail; i-- {
		key := logMessage(all[i])
		if seen[key]++; seen[key] > engineLogRepeats {
			left[key]++
			continue
		}
		kept = append(kept, all[i])
	}
	slices.Reverse(kept)
	for _, key := range slices.Sorted(maps.Keys(left)) {
		kept = append(kept, fmt.Sprintf("(%d more lines of %q left out)", left[key], key))
	}
	u.t.Logf("the end of the engine's log:\n%s", strings.Join(kept, "\n"))
}

// logMessage is a log line's level, logger and message, without its time and fields: hclog
// writes "time [LEVEL]  logger: message: key=value ...".
func logMessage(line string) string {
	_, rest, _ := strings.Cut(line, " ")
	logger, rest, _ := strings.Cut(rest, ": ")
	msg, _, _ := strings.Cut(rest, ": ")
	return logger + ": " + msg
}

func (u *user) writeConfig(hcl string) {
	u.t.Helper()
	if err := os.WriteFile(filepath.Join(u.workDir, "main.tf"), []byte(hcl), 0o600); err != nil {
		u.t.Fatal(err)
	}
}

// run runs a command in the working dir and returns its output and exit code.
func (u *user) run(name string, args ...string) (string, int) {
	u.t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = u.workDir, u.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if exitErr, ok := err.(*exec.ExitError); ok {
		code = exitErr.ExitCode()
	} else if err != nil {
		u.t.Fatalf("running %s: %v", name, err)
	}
	return out.String(), code
}

func (u *user) terraform(args ...string) (string, int) {
	u.t.Helper()
	return u.run(terraform, append(args, "-no-color")...)
}

func (u *user) mustTerraform(args ...string) string {
	u.t.Helper()
	out, code := u.terraform(args...)
	if code != 0 {
		u.t.Fatalf("terraform %s exited %d:\n%s", strings.Join(args, " "), code, out)
	}
	return out
}

func (u *user) cli(args ...string) (string, int) {
	u.t.Helper()
	return u.run(filepath.Join(binDir, "mlcompute"), args...)
}

// client talks to the user's embedded engine directly, without starting one.
func (u *user) client() *client.Client {
	c, err := client.New("unix://"+filepath.Join(u.home, "engine.sock"), "", client.WithAttempts(1))
	if err != nil {
		u.t.Fatal(err)
	}
	return c
}

func (u *user) enginePID() int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := u.client().Status(ctx)
	if err != nil {
		return 0
	}
	return st.PID
}

// engineID is the id of the user's engine (its data dir's engine-id), which names its
// Slurm jobs and labels its pods.
func (u *user) engineID() string {
	u.t.Helper()
	raw, err := os.ReadFile(filepath.Join(u.home, "engine-id"))
	if err != nil {
		u.t.Fatalf("reading the engine id: %v", err)
	}
	return strings.TrimSpace(string(raw))
}

func (u *user) workspaces() []api.Workspace {
	u.t.Helper()
	list, err := u.client().ListWorkspaces(context.Background())
	if err != nil {
		u.t.Fatalf("listing workspaces: %v", err)
	}
	return list
}

func (u *user) waitGone(pid int, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if !processAlive(pid) {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

func processAlive(pid int) bool {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// A zombie has exited; it only waits for its parent to reap it.
	fields := strings.Fields(string(raw))
	return len(fields) > 2 && fields[2] != "Z"
}

func decodeJSON(t *testing.T, raw string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(raw), v); err != nil {
		t.Fatalf("decoding %q: %v", raw, err)
	}
}
