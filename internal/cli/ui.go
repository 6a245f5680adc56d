package cli

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/daemon"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/server"
)

func newUICommand(g *globals) *cobra.Command {
	var listen string
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Print the address of the engine's status page (and a one-time login link)",
		Long: "Print the address of the engine's read-only status page: workspaces, computes with " +
			"their nodes, queued and running jobs with their output, endpoints with their traffic.\n\n" +
			"An engine on TCP with a token serves the page itself: the command prints a one-time " +
			"login link that sets a session cookie in the browser (it works once, for five minutes). " +
			"An engine on a unix socket cannot be reached by a browser: the command then serves the " +
			"page on a loopback port (--listen) until interrupted, behind its own one-time link, " +
			"since a loopback port is open to every local user.",
		Example: "  mlcompute ui\n  MLCOMPUTE_ENDPOINT=http://10.0.0.5:7400 MLCOMPUTE_TOKEN=... mlcompute ui",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			u, err := url.Parse(c.Endpoint())
			if err != nil {
				return err
			}
			if u.Scheme == "http" || u.Scheme == "https" {
				base := u.Scheme + "://" + u.Host
				fmt.Fprintf(w, "status page: %s/ui/\n", base)
				// The token the connection used: the flag, the variable, or for an engine
				// on this machine its data dir's api.token.
				token, err := daemon.EndpointToken(g.endpoint, g.resolvedToken(), g.tokenDataDir())
				if err != nil || token == "" {
					return err
				}
				login, err := c.CreateUILogin(cmd.Context())
				if err != nil {
					return fmt.Errorf("asking the engine for a login link: %w", err)
				}
				fmt.Fprintf(w, "login link (works once, until %s): %s%s\n", login.ExpiresAt.Local().Format("15:04:05"), base, login.Path)
				return nil
			}
			return serveUIProxy(cmd.Context(), w, u.Path, listen)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:0", "loopback address to serve the page on when the engine is on a unix socket")
	return cmd
}

// serveUIProxy serves the status page of the engine on a unix socket at addr until ctx
// ends. The proxy forwards only /ui paths, and only for a browser holding the session
// cookie that its one-time link sets.
func serveUIProxy(ctx context.Context, w interface{ Write([]byte) (int, error) }, socket, addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--listen %q: the page is served on loopback only", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	p := &uiProxy{code: randomToken()}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host, r.Out.Host = "http", "engine", "engine"
		},
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}},
	}
	p.next = rp
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	base := "http://" + ln.Addr().String()
	fmt.Fprintf(w, "status page: %s/ui/\n", base)
	fmt.Fprintf(w, "login link (works once): %s/ui/login?code=%s\n", base, p.code)
	fmt.Fprintf(w, "serving until interrupted (Ctrl-C)\n")
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// uiProxy guards the forwarded page with a one-time code and the session it opens.
type uiProxy struct {
	next http.Handler

	mu      sync.Mutex
	code    string // "" once spent
	session string
}

func (p *uiProxy) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path == "/ui/login" {
		p.mu.Lock()
		ok := p.code != "" && subtle.ConstantTimeCompare([]byte(req.URL.Query().Get("code")), []byte(p.code)) == 1
		if ok {
			p.code, p.session = "", randomToken()
		}
		session := p.session
		p.mu.Unlock()
		if !ok {
			http.Error(w, "This login link is unknown or used. Run `mlcompute ui` again for a new one.", http.StatusUnauthorized)
			return
		}
		http.SetCookie(w, &http.Cookie{Name: server.UICookie, Value: session, Path: "/ui", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		http.Redirect(w, req, "/ui/", http.StatusSeeOther)
		return
	}
	if req.URL.Path != "/ui" && !strings.HasPrefix(req.URL.Path, "/ui/") {
		http.NotFound(w, req)
		return
	}
	cookie, err := req.Cookie(server.UICookie)
	p.mu.Lock()
	session := p.session
	p.mu.Unlock()
	if err != nil || session == "" || subtle.ConstantTimeCompare([]byte(cookie.Value), []byte(session)) != 1 {
		http.Error(w, "Not logged in. Open the one-time link `mlcompute ui` printed.", http.StatusUnauthorized)
		return
	}
	req.Header.Del("Cookie") // the proxy's session is not the engine's business
	p.next.ServeHTTP(w, req)
}

func randomToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
