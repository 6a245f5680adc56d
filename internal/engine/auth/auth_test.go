package auth_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/auth"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

func TestRolesAllow(t *testing.T) {
	reader := auth.Identity{Name: "r", Role: api.RoleReader, Workspaces: []string{"a"}}
	contrib := auth.Identity{Name: "c", Role: api.RoleContributor, Workspaces: []string{"a", "b"}}
	contribAll := auth.Identity{Name: "call", Role: api.RoleContributor}
	op := auth.Identity{Name: "o", Role: api.RoleOperator, Workspaces: []string{"a"}}
	bogus := auth.Identity{Name: "x", Role: "admin"}
	need := func(v auth.Verb, ws string) auth.Need { return auth.Need{Verb: v, Workspace: ws} }
	for _, tt := range []struct {
		id   auth.Identity
		need auth.Need
		want bool
	}{
		{reader, need(auth.Any, ""), true},
		{reader, need(auth.Read, "a"), true},
		{reader, need(auth.Read, "b"), false},
		{reader, need(auth.Write, "a"), false},
		{reader, need(auth.Read, auth.AllWorkspaces), false},
		{contrib, need(auth.Write, "b"), true},
		{contrib, need(auth.Write, "c"), false},
		{contrib, need(auth.Read, auth.AllWorkspaces), false},
		{contrib, need(auth.Admin, ""), false},
		{contribAll, need(auth.Write, "anything"), true},
		{contribAll, need(auth.Read, auth.AllWorkspaces), true},
		{contribAll, need(auth.Admin, ""), false},
		{op, need(auth.Admin, ""), true},
		{op, need(auth.Write, "b"), false},
		{auth.Local, need(auth.Admin, ""), true},
		{auth.Local, need(auth.Write, auth.AllWorkspaces), true},
		{bogus, need(auth.Any, ""), false},
	} {
		if got := tt.id.Allows(tt.need); got != tt.want {
			t.Errorf("%s (%s %v) allowed %s = %v, want %v", tt.id.Name, tt.id.Role, tt.id.Workspaces, tt.need, got, tt.want)
		}
	}
	msg := contrib.Denied(need(auth.Write, "c")).Error()
	if msg != `token "c" (role contributor, workspaces a, b) lacks the permission write on workspace "c"` {
		t.Fatalf("denial = %s", msg)
	}
}

// TestTokensAreStoredHashed makes tokens, reopens the store and finds them by secret,
// with no secret anywhere in the store's file.
func TestTokensAreStoredHashed(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	st, err := store.Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.OpenTokens(st, clk)
	if err != nil {
		t.Fatal(err)
	}
	var secrets []string
	for _, spec := range []api.TokenSpec{
		{Name: "ci", Role: api.RoleContributor, Workspaces: []string{"team-a"}},
		{Name: "dash", Role: api.RoleReader, ExpiresInSeconds: 3600},
	} {
		created, err := tokens.Create(spec, "token-file")
		if err != nil {
			t.Fatal(err)
		}
		secrets = append(secrets, created.Secret)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets {
		if bytes.Contains(raw, []byte(s)) || bytes.Contains(raw, []byte(strings.TrimPrefix(s, "mlc_"))) {
			t.Fatal("a token's secret is in the store's file")
		}
	}

	st, err = store.Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tokens, err = auth.OpenTokens(st, clk)
	if err != nil {
		t.Fatal(err)
	}
	id, found, expired := tokens.Lookup(secrets[0])
	if !found || expired || id.Name != "ci" || id.Role != api.RoleContributor || strings.Join(id.Workspaces, ",") != "team-a" {
		t.Fatalf("lookup after reopening = %+v %v %v", id, found, expired)
	}
	if _, found, _ := tokens.Lookup(secrets[0] + "x"); found {
		t.Fatal("a secret with one more character was found")
	}
	if _, found, _ := tokens.Lookup(""); found {
		t.Fatal("the empty secret was found")
	}
	clk.Step(time.Hour)
	if id, found, expired := tokens.Lookup(secrets[1]); found || !expired || id.Name != "dash" {
		t.Fatalf("lookup at expiry = %+v %v %v", id, found, expired)
	}
	if err := tokens.Revoke("ci"); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := tokens.Lookup(secrets[0]); found {
		t.Fatal("a revoked token was found")
	}
	for _, bad := range []api.TokenSpec{
		{Name: "", Role: api.RoleReader},
		{Name: "ok", Role: "root"},
		{Name: "ok", Role: api.RoleReader, Workspaces: []string{"a/b"}},
		{Name: api.TokenFileName, Role: api.RoleReader},
		{Name: "ok", Role: api.RoleReader, ExpiresInSeconds: -1},
	} {
		if _, err := tokens.Create(bad, "t"); !api.IsInvalid(err) {
			t.Errorf("create %+v: %v, want invalid", bad, err)
		}
	}
}
