package cli

import (
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"testing"
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
