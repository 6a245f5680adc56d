//go:build unix

package e2e

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// examplesDir is the repository's examples/ directory.
func examplesDir() string {
	return filepath.Join(repoRoot, "examples")
}

// copyExamples copies examples/ into the user's working dir, so that terraform's files
// never land in the repository, and returns the copy's path.
func (u *user) copyExamples() string {
	u.t.Helper()
	dst := filepath.Join(u.workDir, "examples")
	if err := os.CopyFS(dst, os.DirFS(examplesDir())); err != nil {
		u.t.Fatalf("copying examples: %v", err)
	}
	return dst
}

// terraformIn runs terraform in dir instead of the working dir.
func (u *user) terraformIn(dir string, args ...string) (string, int) {
	u.t.Helper()
	saved := u.workDir
	u.workDir = dir
	defer func() { u.workDir = saved }()
	return u.terraform(args...)
}

func (u *user) mustTerraformIn(dir string, args ...string) string {
	u.t.Helper()
	out, code := u.terraformIn(dir, args...)
	if code != 0 {
		u.t.Fatalf("terraform %s in %s exited %d:\n%s", strings.Join(args, " "), dir, code, out)
	}
	return out
}

// Every example in the documentation and the repository is a valid configuration for this
// provider: terraform validates each directory (and the modules they call) against the
// provider's schema and its plan-time checks.
func TestE2E_ExamplesAreValid(t *testing.T) {
	t.Parallel()
	u := newUser(t)
	root := u.copyExamples()
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".tf") && !slices.Contains(dirs, filepath.Dir(p)) {
			dirs = append(dirs, filepath.Dir(p))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 8 {
		t.Fatalf("found %d example directories; the walk is broken", len(dirs))
	}
	for _, dir := range dirs {
		rel, _ := filepath.Rel(root, dir)
		t.Run(rel, func(t *testing.T) {
			requireSource(t, dir)
			// With dev_overrides, init would look the provider up in the registry; get
			// installs the modules alone.
			u.mustTerraformIn(dir, "get")
			if out := u.mustTerraformIn(dir, "validate"); !strings.Contains(out, "The configuration is valid") {
				t.Errorf("validate:\n%s", out)
			}
		})
	}
}

// requireSource gives a documentation example, which shows resources alone, the
// required_providers block a user's configuration has, so that terraform looks for
// mlcompute/mlcompute rather than hashicorp/mlcompute.
func requireSource(t *testing.T, dir string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.tf"))
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), "required_providers") {
			return
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "terraform.tf"), []byte(requiredProviders), 0o600); err != nil {
		t.Fatal(err)
	}
}

// The online endpoint example, as its comments tell a user to run it: blue serves the
// Python scorer, then a green version takes half the traffic through the blue/green
// module, and the CLI invokes each.
func TestE2E_OnlineEndpointExample(t *testing.T) {
	t.Parallel()
	u := newUser(t)
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatal("python3 not found: the example's scorer needs it (make test installs it: scripts/test-deps.sh)")
	}
	dir := filepath.Join(u.copyExamples(), "online-endpoint")
	u.mustTerraformIn(dir, "get")
	u.mustTerraformIn(dir, "apply", "-auto-approve")

	invoke := func(args ...string) string {
		t.Helper()
		out, code := u.cli(append([]string{"endpoint", "invoke", "--workspace", "serving", "churn", "--data", `{"data": [[1, 2, 3]]}`}, args...)...)
		if code != 0 {
			t.Fatalf("endpoint invoke %v: exit %d: %s", args, code, out)
		}
		return out
	}
	if out := invoke(); !strings.Contains(out, `"version": "v1"`) || !strings.Contains(out, `"predictions": [0.95`) {
		t.Fatalf("invoke before the rollout answered %s; want blue's v1 prediction", out)
	}
	green := []string{"-var", "green_code=scorer", "-var", "green_version=v2", "-var", "green_traffic=50"}
	u.mustTerraformIn(dir, append([]string{"apply", "-auto-approve"}, green...)...)
	if out := invoke("--deployment", "green"); !strings.Contains(out, `"version": "v2"`) {
		t.Fatalf("invoke pinned to green answered %s; want v2", out)
	}
	if out := invoke("--deployment", "blue"); !strings.Contains(out, `"version": "v1"`) {
		t.Fatalf("invoke pinned to blue answered %s; want v1", out)
	}
	if out, code := u.terraformIn(dir, append([]string{"plan", "-detailed-exitcode"}, green...)...); code != 0 {
		t.Fatalf("plan after the rollout: exit %d (want 0, no changes):\n%s", code, out)
	}
	u.mustTerraformIn(dir, "destroy", "-auto-approve")
}
