package server

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/auth"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/ui"
)

// The status page (/ui) is served with the API's authentication: a bearer token, or, for a
// browser that cannot send one, a session cookie set by a one-time login link
// (POST /v1/ui/logins, printed by `mlcompute ui`).
const (
	// UICookie is the session cookie's name.
	UICookie = "mlcompute_ui"
	// loginTTL is how long an unused login code works; sessionTTL how long a session lasts.
	loginTTL   = 5 * time.Minute
	sessionTTL = 12 * time.Hour
)

// uiAuth holds login codes and sessions in memory: an engine restart logs everyone out,
// which a fresh `mlcompute ui` undoes.
type uiAuth struct {
	mu       sync.Mutex
	codes    map[string]time.Time // code -> expiry
	sessions map[string]time.Time // session ID -> expiry
}

func newUIAuth() *uiAuth {
	return &uiAuth{codes: map[string]time.Time{}, sessions: map[string]time.Time{}}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newCode makes a login code valid until now+loginTTL.
func (a *uiAuth) newCode(now time.Time) (string, time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.expire(now)
	code, exp := randomHex(24), now.Add(loginTTL)
	a.codes[code] = exp
	return code, exp
}

// redeem spends a code and returns a new session ID, or "" when the code is unknown,
// spent or expired.
func (a *uiAuth) redeem(code string, now time.Time) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.expire(now)
	if _, ok := a.codes[code]; !ok || code == "" {
		return ""
	}
	delete(a.codes, code)
	id := randomHex(32)
	a.sessions[id] = now.Add(sessionTTL)
	return id
}

func (a *uiAuth) valid(session string, now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	exp, ok := a.sessions[session]
	return ok && now.Before(exp)
}

// expire drops spent codes and sessions. Callers hold a.mu.
func (a *uiAuth) expire(now time.Time) {
	for k, exp := range a.codes {
		if !now.Before(exp) {
			delete(a.codes, k)
		}
	}
	for k, exp := range a.sessions {
		if !now.Before(exp) {
			delete(a.sessions, k)
		}
	}
}

// isUIPath reports whether a path belongs to the status page.
func isUIPath(p string) bool { return p == "/ui" || strings.HasPrefix(p, "/ui/") }

// uiAuthorized reports whether a request may see the page: no token configured, a token
// that may read every workspace (the page shows them all), or a valid session cookie.
func (s *Server) uiAuthorized(req *http.Request) bool {
	if c, _, err := s.identify(req); err == nil && c.id.Allows(auth.Need{Verb: auth.Read, Workspace: auth.AllWorkspaces}) {
		return true
	}
	c, err := req.Cookie(UICookie)
	return err == nil && s.ui.valid(c.Value, s.clock.Now())
}

// serveUI serves /ui, its assets, its JSON state and its login link.
func (s *Server) serveUI(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path == "/ui/login" {
		s.uiLogin(w, req)
		return
	}
	if !s.uiAuthorized(req) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte("Not logged in. Run `mlcompute ui` and open the one-time link it prints.\n"))
		return
	}
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "the status page is read-only", http.StatusMethodNotAllowed)
		return
	}
	switch req.URL.Path {
	case "/ui":
		http.Redirect(w, req, "/ui/", http.StatusFound)
	case "/ui/api/state":
		st, err := s.uiState.Build(req.Context(), s.clock.Now())
		if err != nil {
			s.writeError(w, req, err)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusOK, st)
	default:
		w.Header().Set("Cache-Control", "no-cache")
		// The page's own scripts only; nothing is loaded from elsewhere.
		w.Header().Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'")
		http.StripPrefix("/ui", http.FileServerFS(ui.Assets())).ServeHTTP(w, req)
	}
}

// uiLogin spends a one-time code, sets the session cookie and sends the browser to the page.
func (s *Server) uiLogin(w http.ResponseWriter, req *http.Request) {
	id := s.ui.redeem(req.URL.Query().Get("code"), s.clock.Now())
	if id == "" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte("This login link is unknown, used or expired. Run `mlcompute ui` again for a new one.\n"))
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: UICookie, Value: id, Path: "/ui", MaxAge: int(sessionTTL / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: req.TLS != nil,
	})
	http.Redirect(w, req, "/ui/", http.StatusSeeOther)
}

// createUILogin makes a one-time login code (POST /v1/ui/logins).
func (s *Server) createUILogin(w http.ResponseWriter, _ *http.Request) error {
	code, exp := s.ui.newCode(s.clock.Now())
	writeJSON(w, http.StatusCreated, api.UILogin{
		Code: code, Path: "/ui/login?code=" + url.QueryEscape(code), ExpiresAt: exp.UTC(),
	})
	return nil
}
