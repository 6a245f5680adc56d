package cli

import (
	"bytes"
	"context"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/daemon"
)

// The loopback proxy of `mlcompute ui` forwards the page only to the browser that opened
// its one-time link, and the link works once.
func TestUIProxyOneTimeLink(t *testing.T) {
	var forwarded int
	p := &uiProxy{code: "c0de", next: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		forwarded++
		if _, err := req.Cookie("mlcompute_ui"); err == nil {
			t.Error("the proxy's session cookie was forwarded to the engine")
		}
	})}
	srv := httptest.NewServer(p)
	defer srv.Close()
	get := func(c *http.Client, path string) int {
		t.Helper()
		res, err := c.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	stranger := &http.Client{}
	if code := get(stranger, "/ui/"); code != http.StatusUnauthorized {
		t.Fatalf("page without a session: %d; want 401", code)
	}
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	if code := get(browser, "/ui/login?code=wrong"); code != http.StatusUnauthorized {
		t.Fatalf("wrong code: %d; want 401", code)
	}
	if code := get(browser, "/ui/login?code=c0de"); code != http.StatusOK || forwarded != 1 {
		t.Fatalf("login: %d, forwarded %d; want the page after the redirect", code, forwarded)
	}
	if code := get(browser, "/ui/api/state"); code != http.StatusOK || forwarded != 2 {
		t.Fatalf("state with the session: %d; want 200", code)
	}
	if code := get(stranger, "/ui/login?code=c0de"); code != http.StatusUnauthorized {
		t.Fatalf("second use of the link: %d; want 401", code)
	}
	if code := get(browser, "/v1/workspaces"); code != http.StatusNotFound {
		t.Fatalf("API path through the proxy: %d; want 404 (only /ui is forwarded)", code)
	}
}

// On the engine's own machine, `MLCOMPUTE_ENDPOINT=http://127.0.0.1:PORT mlcompute ui`
// authenticates with the data dir's api.token, and prints a login link made with it: the
// page would otherwise send the user back to `mlcompute ui` in a loop.
func TestUILoginLinkWithDataDirToken(t *testing.T) {
	t.Setenv("MLCOMPUTE_TOKEN", "")
	dir, err := os.MkdirTemp("", "mlc-ui-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(ctx, daemon.Options{DataDir: dir, Listen: "tcp://127.0.0.1:0", ScoringListen: "127.0.0.1:0", Version: "test",
			AgentArgv: []string{exe, "node-agent"}, Ready: func(addr string) { ready <- addr }})
	}()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("engine did not start: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("engine: %v", err)
		}
	})
	if _, err := os.Stat(filepath.Join(dir, daemon.TokenFile)); err != nil {
		t.Fatalf("the TCP engine made no %s: %v", daemon.TokenFile, err)
	}

	root := NewRootCommand(Config{Use: "mlcompute", Version: "test"})
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"--data-dir", dir, "--endpoint", "http://" + addr, "ui"})
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("ui: %v", err)
	}
	m := regexp.MustCompile(`login link \(works once, until [0-9:]+\): (\S+)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("ui printed no login link:\n%s", out.String())
	}
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	res, err := browser.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Request.URL.Path != "/ui/" {
		t.Fatalf("following the link: %d at %s; want the page at /ui/", res.StatusCode, res.Request.URL.Path)
	}
}
