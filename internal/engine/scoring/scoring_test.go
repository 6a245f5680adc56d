package scoring_test

import (
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/scoring"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

func openFront(t *testing.T, path string, clk *clocktesting.FakeClock) (*scoring.Front, func()) {
	t.Helper()
	st, err := store.Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	f := scoring.New(st, clk, hclog.NewNullLogger(), router.Options{})
	return f, func() { f.Close(); st.Close() }
}

// A token opens the one endpoint it was issued for, until it expires, and survives an
// engine restart (its secret is in the store); a forged or truncated one opens nothing.
func TestTokens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	f, closeFront := openFront(t, path, clk)
	tok, expires, err := f.IssueToken("wsp/scorer")
	if err != nil {
		t.Fatal(err)
	}
	if !expires.Equal(clk.Now().Add(scoring.TokenLifetime)) {
		t.Fatalf("expires %s; want an hour from now", expires)
	}
	if !f.VerifyToken("wsp/scorer", tok) {
		t.Fatal("a fresh token does not verify")
	}
	if f.VerifyToken("other/scorer", tok) {
		t.Fatal("a token verifies for another endpoint")
	}
	payload, mac, _ := strings.Cut(tok, ".")
	for _, forged := range []string{payload + "x." + mac, payload, "", "." + mac} {
		if f.VerifyToken("wsp/scorer", forged) {
			t.Fatalf("forged token %q verifies", forged)
		}
	}
	closeFront()

	again, closeAgain := openFront(t, path, clk)
	defer closeAgain()
	if !again.VerifyToken("wsp/scorer", tok) {
		t.Fatal("a token issued before a restart does not verify after it")
	}
	clk.Step(scoring.TokenLifetime)
	if again.VerifyToken("wsp/scorer", tok) {
		t.Fatal("an expired token verifies")
	}
}

// The scoring listener keeps its first address across restarts, so scoring URIs never
// change; a kept port someone else took is an error that says how to move; TLS makes the
// URIs https.
func TestListenKeepsItsAddress(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	clk := clocktesting.NewFakeClock(time.Now())
	f, closeFront := openFront(t, path, clk)
	if f.BaseURL() != "" {
		t.Fatalf("base URL before Listen: %q", f.BaseURL())
	}
	ln, err := f.Listen("")
	if err != nil {
		t.Fatal(err)
	}
	first := f.BaseURL()
	if !strings.HasPrefix(first, "http://127.0.0.1:") || first != "http://"+ln.Addr().String() {
		t.Fatalf("base URL %q for a listener on %s", first, ln.Addr())
	}
	ln.Close()
	closeFront()

	again, closeAgain := openFront(t, path, clk)
	ln, err = again.Listen("")
	if err != nil {
		t.Fatal(err)
	}
	if again.BaseURL() != first {
		t.Fatalf("base URL after a restart %q; want %q kept", again.BaseURL(), first)
	}
	again.OverTLS()
	if want := "https://" + strings.TrimPrefix(first, "http://"); again.BaseURL() != want {
		t.Fatalf("base URL over TLS %q; want %q", again.BaseURL(), want)
	}
	closeAgain()

	// The kept port is taken (ln still holds it): the error names it and the flag.
	taken, closeTaken := openFront(t, path, clk)
	defer closeTaken()
	defer ln.Close()
	if _, err := taken.Listen(""); err == nil || !strings.Contains(err.Error(), ln.Addr().String()) || !strings.Contains(err.Error(), "--scoring-listen") {
		t.Fatalf("Listen on a kept port that is taken: %v", err)
	}
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := other.Addr().String()
	other.Close()
	if l2, err := taken.Listen(addr); err != nil || taken.BaseURL() != "http://"+addr {
		t.Fatalf("Listen(%s): %v, base %q", addr, err, taken.BaseURL())
	} else {
		l2.Close()
	}
}
