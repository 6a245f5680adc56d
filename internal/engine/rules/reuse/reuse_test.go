package reuse

import (
	"strings"
	"testing"
)

func base() Parts {
	return Parts{
		Command:         "python train.py --data ${{inputs.data}} --lr ${{inputs.lr}} --out ${{outputs.model}}",
		Env:             map[string]string{"SEED": "1"},
		CodeHash:        "sha256:code",
		EnvironmentHash: "sha256:env",
		Inputs:          map[string]string{"data": "sha256:data"},
		Literals:        map[string]string{"lr": "0.1"},
		Outputs:         map[string]string{"model": "uri_folder upload"},
	}
}

func mustKey(t *testing.T, p Parts) string {
	t.Helper()
	k, ok, missing := Key(p)
	if !ok {
		t.Fatalf("Key: no key, missing %s", missing)
	}
	return k
}

// TestKeyCoversEveryPart changes one part at a time: each change must change the key.
func TestKeyCoversEveryPart(t *testing.T) {
	k0 := mustKey(t, base())
	if !strings.HasPrefix(k0, "sha256:") || len(k0) != len("sha256:")+64 {
		t.Fatalf("key %q is not sha256:<hex>", k0)
	}
	if again := mustKey(t, base()); again != k0 {
		t.Fatalf("the same parts gave two keys: %s, %s", k0, again)
	}
	edits := map[string]func(*Parts){
		"command":          func(p *Parts) { p.Command += " --epochs 2" },
		"env value":        func(p *Parts) { p.Env["SEED"] = "2" },
		"env added":        func(p *Parts) { p.Env["X"] = "" },
		"distribution":     func(p *Parts) { p.Distribution = "pytorch" },
		"code":             func(p *Parts) { p.CodeHash = "sha256:code2" },
		"environment":      func(p *Parts) { p.EnvironmentHash = "sha256:env2" },
		"input digest":     func(p *Parts) { p.Inputs["data"] = "sha256:data2" },
		"input renamed":    func(p *Parts) { p.Inputs = map[string]string{"data2": "sha256:data"} },
		"literal":          func(p *Parts) { p.Literals["lr"] = "0.01" },
		"literal as input": func(p *Parts) { p.Literals = nil; p.Inputs["lr"] = "0.1" },
		"output type":      func(p *Parts) { p.Outputs["model"] = "uri_file upload" },
		"output added":     func(p *Parts) { p.Outputs["metrics"] = "uri_file upload" },
	}
	for name, edit := range edits {
		p := base()
		edit(&p)
		if k := mustKey(t, p); k == k0 {
			t.Errorf("%s: the key did not change", name)
		}
	}
}

func TestKeyIsNeverPartial(t *testing.T) {
	tests := []struct {
		name, missing string
		edit          func(*Parts)
	}{
		{"code unknown", "code", func(p *Parts) { p.CodeHash = Unknown }},
		{"environment unknown", "environment", func(p *Parts) { p.EnvironmentHash = Unknown }},
		{"input unknown", "inputs.data", func(p *Parts) { p.Inputs["data"] = Unknown }},
		{"input without a digest", "inputs.empty", func(p *Parts) { p.Inputs["empty"] = "" }},
	}
	for _, tt := range tests {
		p := base()
		tt.edit(&p)
		k, ok, missing := Key(p)
		if ok || k != "" {
			t.Errorf("%s: got key %q", tt.name, k)
		}
		if missing != tt.missing {
			t.Errorf("%s: missing = %q, want %q", tt.name, missing, tt.missing)
		}
	}
	// No code and no environment are known values, not unknown ones.
	p := base()
	p.CodeHash, p.EnvironmentHash = "", ""
	mustKey(t, p)
}

func TestHit(t *testing.T) {
	present := map[string]bool{"m1": true, "m2": true, "m3": true}
	has := func(d string) bool { return present[d] }
	old := Run{Job: "p1", Step: "train", Outputs: []string{"m1"}, Order: 1}
	newer := Run{Job: "p2", Step: "train", Outputs: []string{"m2", "m3"}, Order: 2}
	gone := Run{Job: "p3", Step: "train", Outputs: []string{"m2", "missing"}, Order: 3}
	det := Policy{Deterministic: true}

	tests := []struct {
		name   string
		hasKey bool
		policy Policy
		runs   []Run
		want   string // ReusedFrom, "" for a run
	}{
		{"the newest run whose outputs are all there", true, det, []Run{old, newer}, "p2/train"},
		{"a run with a missing blob is never a hit", true, det, []Run{old, gone}, "p1/train"},
		{"only a run with a missing blob", true, det, []Run{gone}, ""},
		{"no earlier run", true, det, nil, ""},
		{"no key", false, det, []Run{old}, ""},
		{"force_rerun", true, Policy{Deterministic: true, ForceRerun: true}, []Run{old}, ""},
		{"is_deterministic false", true, Policy{}, []Run{old}, ""},
	}
	for _, tt := range tests {
		r, ok := Hit(tt.hasKey, tt.policy, tt.runs, has)
		got := ""
		if ok {
			got = r.ReusedFrom()
		}
		if got != tt.want {
			t.Errorf("%s: Hit = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestExplain(t *testing.T) {
	last := base()
	cur := base()
	cur.CodeHash = "sha256:code2"
	cur.Literals["lr"] = "0.2"
	delete(cur.Env, "SEED")
	var differ []string
	for _, c := range Explain(cur, &last) {
		if c.Differs {
			differ = append(differ, c.Name)
		}
	}
	want := "code,inputs.lr,environment_variables.SEED"
	if got := strings.Join(differ, ","); got != want {
		t.Errorf("differing parts = %s, want %s", got, want)
	}
	for _, c := range Explain(cur, nil) {
		if c.Differs || c.Last != "" {
			t.Errorf("with no earlier run, %s is marked as differing", c.Name)
		}
	}
}
