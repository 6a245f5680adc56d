// Package client is the typed Go client of the engine's HTTP JSON API. Every method is
// (ctx, ...) (*T, error) over one send helper; a failed call returns *api.Error with the
// engine's stable code, so callers branch with api.IsNotFound and friends.
package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/tlsconfig"
)

// DefaultUnreachableWait is how long a call whose context has no deadline keeps retrying
// while the engine cannot be reached (a call with a deadline retries until the deadline).
const DefaultUnreachableWait = 1500 * time.Millisecond

// Back-off between tries while the engine cannot be reached: the first retry comes soon
// (an embedded engine restarts in well under a second), later ones at most every 2 s.
const (
	backoffFirst = 100 * time.Millisecond
	backoffMax   = 2 * time.Second
)

// Client talks to one engine.
type Client struct {
	base     string // scheme://host, without a trailing slash
	endpoint string
	token    string
	http     *http.Client
	clock    clock.Clock
	// reconnect, when set, is called after a transport failure before the call is retried:
	// the embedded engine's launcher restarts a crashed engine there.
	reconnect func(context.Context) error
	// attempts bounds the tries of one call (0: no bound but time).
	attempts int
	// unreachableWait is how long a call without a context deadline keeps retrying.
	unreachableWait time.Duration
}

// Option adjusts a client.
type Option func(*Client)

// WithReconnect sets the hook run after a transport failure, before retrying.
func WithReconnect(f func(context.Context) error) Option { return func(c *Client) { c.reconnect = f } }

// WithClock sets the clock used for retry back-off.
func WithClock(clk clock.Clock) Option { return func(c *Client) { c.clock = clk } }

// WithAttempts bounds how many times a call is tried when the transport fails (default: no
// bound; the time limits below apply). WithAttempts(1) never retries.
func WithAttempts(n int) Option { return func(c *Client) { c.attempts = n } }

// WithUnreachableWait sets how long a retryable call whose context has no deadline keeps
// retrying while the engine cannot be reached (default DefaultUnreachableWait). A call
// whose context has a deadline retries until that deadline, whatever this says: an
// operation's timeout is how long it waits for an engine that crashed and comes back.
func WithUnreachableWait(d time.Duration) Option { return func(c *Client) { c.unreachableWait = d } }

// WithTLS sets the TLS configuration of an https endpoint's connections (the pinned CA:
// tlsconfig.Client).
func WithTLS(cfg *tls.Config) Option {
	return func(c *Client) {
		if t, ok := c.http.Transport.(*http.Transport); ok {
			t.TLSClientConfig = cfg
		}
	}
}

// New returns a client for endpoint, either unix:///path/to/engine.sock or
// http(s)://host:port. A TCP endpoint needs a token unless it is loopback.
func New(endpoint, token string, opts ...Option) (*Client, error) {
	c := &Client{endpoint: endpoint, token: token, clock: clock.RealClock{}, unreachableWait: DefaultUnreachableWait}
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, fmt.Errorf("parsing endpoint %q: %w", endpoint, err)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	switch u.Scheme {
	case "unix":
		path := u.Path
		if path == "" {
			return nil, fmt.Errorf("endpoint %q names no socket path; use unix:///path/to/engine.sock", endpoint)
		}
		transport.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}
		c.base = "http://engine"
	case "http", "https":
		if u.Host == "" {
			return nil, fmt.Errorf("endpoint %q names no host", endpoint)
		}
		c.base = u.Scheme + "://" + u.Host
	default:
		return nil, fmt.Errorf("endpoint %q: scheme must be unix, http or https", endpoint)
	}
	c.http = &http.Client{Transport: transport}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// Endpoint is the endpoint the client was made for.
func (c *Client) Endpoint() string { return c.endpoint }

// request describes one call.
type request struct {
	method string
	path   string
	query  url.Values
	body   any
	// raw, when set, is sent as is (application/octet-stream) instead of a JSON body.
	raw    []byte
	header http.Header
	// retry allows a retry after a transport failure: true for calls that are idempotent
	// (reads, replaces, deletes, and creates that carry an idempotency key).
	retry bool
}

// send performs a call and decodes a 2xx body into out (when out is not nil).
func (c *Client) send(ctx context.Context, r request, out any) error {
	payload := r.raw
	if r.body != nil {
		var err error
		if payload, err = json.Marshal(r.body); err != nil {
			return fmt.Errorf("encoding request: %w", err)
		}
	}
	target := c.base + r.path
	if len(r.query) > 0 {
		target += "?" + r.query.Encode()
	}
	attempts := 1
	if r.retry {
		attempts = c.attempts
	}
	// Without a deadline, retries end unreachableWait after the first try; with one, at
	// the deadline (ctx ends the wait).
	_, hasDeadline := ctx.Deadline()
	giveUp := c.clock.Now().Add(c.unreachableWait)
	backoff := backoffFirst
	for attempt := 1; ; attempt++ {
		err := c.do(ctx, r, target, payload, out)
		if err == nil || !isTransport(err) || ctx.Err() != nil {
			return err
		}
		// A call that may not be repeated is tried again only when it never reached the
		// engine (the connection could not even be opened) and there is an engine to start.
		neverSent := !r.retry && attempt == 1 && c.reconnect != nil && isDialFailure(err)
		if !neverSent && (!r.retry || attempts > 0 && attempt >= attempts) {
			return err
		}
		if !hasDeadline && !c.clock.Now().Before(giveUp) {
			return err
		}
		if c.reconnect != nil {
			if rerr := c.reconnect(ctx); rerr != nil {
				if ctx.Err() != nil {
					return err
				}
				return fmt.Errorf("%w (reconnecting: %v)", err, rerr)
			}
			// The engine answered its health check: try again at once.
			continue
		}
		wait := backoff
		if !hasDeadline {
			wait = min(wait, max(giveUp.Sub(c.clock.Now()), 0))
		}
		select {
		case <-ctx.Done():
			return err
		case <-c.clock.After(wait):
		}
		backoff = min(2*backoff, backoffMax)
	}
}

// isDialFailure reports whether err is a call that failed before anything was sent: the
// connection to the engine could not be opened.
func isDialFailure(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

type transportError struct{ err error }

func (e *transportError) Error() string { return e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

// callError wraps a failed call's error: a transport error (retried) unless the engine's
// certificate was refused, which no retry changes.
func (c *Client) callError(err error) error {
	err = fmt.Errorf("calling engine at %s: %w", c.endpoint, err)
	if errors.Is(err, tlsconfig.ErrUntrusted) {
		return err
	}
	return &transportError{err}
}

func isTransport(err error) bool {
	var te *transportError
	return errors.As(err, &te)
}

// IsUnreachable reports whether err means the engine could not be reached at all.
func IsUnreachable(err error) bool { return isTransport(err) }

func (c *Client) do(ctx context.Context, r request, target string, payload []byte, out any) error {
	var body io.Reader
	if payload != nil {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, target, body)
	if err != nil {
		return fmt.Errorf("building request: %w", err)
	}
	for k, vs := range r.header {
		req.Header[k] = vs
	}
	switch {
	case r.raw != nil:
		req.Header.Set("Content-Type", "application/octet-stream")
	case payload != nil:
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return c.callError(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return &transportError{fmt.Errorf("reading engine response: %w", err)}
	}
	if resp.StatusCode >= 300 {
		if gatewayFailure(resp.StatusCode, raw) {
			return &transportError{fmt.Errorf("calling engine at %s: %w", c.endpoint, decodeError(resp.StatusCode, raw))}
		}
		return decodeError(resp.StatusCode, raw)
	}
	if out == nil || len(raw) == 0 {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("decoding engine response: %w", err)
	}
	return nil
}

// gatewayFailure reports whether a response is a proxy's between the client and the engine
// saying the engine is not there (502, 503, 504 without the engine's error body): as good
// as a failed connection, and retried like one.
func gatewayFailure(status int, raw []byte) bool {
	if status != http.StatusBadGateway && status != http.StatusServiceUnavailable && status != http.StatusGatewayTimeout {
		return false
	}
	var body api.ErrorBody
	return json.Unmarshal(raw, &body) != nil || body.Error == nil || body.Error.Code == ""
}

func decodeError(status int, raw []byte) error {
	var body api.ErrorBody
	if err := json.Unmarshal(raw, &body); err != nil || body.Error == nil || body.Error.Code == "" {
		text := strings.TrimSpace(string(raw))
		if len(text) > 200 {
			text = text[:200] + "..."
		}
		return &api.Error{Code: api.CodeInternal, Status: status, Message: fmt.Sprintf("engine answered HTTP %d: %s", status, text)}
	}
	body.Error.Status = status
	return body.Error
}

// newIdempotencyKey returns a random key for one logical create call.
func newIdempotencyKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Status returns the engine's status.
func (c *Client) Status(ctx context.Context) (*api.Status, error) {
	var out api.Status
	if err := c.send(ctx, request{method: "GET", path: "/v1/status", retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Shutdown asks the engine to stop. It is not retried: a restarted engine must not be stopped.
func (c *Client) Shutdown(ctx context.Context) error {
	return c.send(ctx, request{method: "POST", path: "/v1/shutdown"}, nil)
}

// Backup writes a consistent copy of the engine's store to w and returns its size. A copy
// cut short (the engine failed or went away midway) is an error, never a short success.
// It is not retried: w may already hold part of a copy.
func (c *Client) Backup(ctx context.Context, w io.Writer) (int64, error) {
	return c.backup(ctx, "/v1/backup", w)
}

// BackupArchive writes a backup of the engine's store and of the artifacts it references
// to w, as a tar archive laid out as the data dir (state.db, artifacts/blobs/...), and
// returns its size. A copy cut short is an error. It is not retried.
func (c *Client) BackupArchive(ctx context.Context, w io.Writer) (int64, error) {
	return c.backup(ctx, "/v1/backup?artifacts=true", w)
}

func (c *Client) backup(ctx context.Context, path string, w io.Writer) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return 0, fmt.Errorf("building request: %w", err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, c.callError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return 0, decodeError(resp.StatusCode, raw)
	}
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, fmt.Errorf("reading the backup after %d bytes: %w", n, err)
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return n, fmt.Errorf("the backup ended after %d of %d bytes", n, resp.ContentLength)
	}
	return n, nil
}

// ListWorkspaces lists every workspace.
func (c *Client) ListWorkspaces(ctx context.Context) ([]api.Workspace, error) {
	var out api.WorkspaceList
	if err := c.send(ctx, request{method: "GET", path: "/v1/workspaces", retry: true}, &out); err != nil {
		return nil, err
	}
	return out.Workspaces, nil
}

// CreateWorkspace creates a workspace. One idempotency key covers every retry of the call,
// so a create that reached the engine just before it crashed is not made twice.
func (c *Client) CreateWorkspace(ctx context.Context, spec api.WorkspaceSpec) (*api.Workspace, error) {
	var out api.Workspace
	if err := c.send(ctx, request{method: "POST", path: "/v1/workspaces", body: spec, header: idempotent(), retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetWorkspace returns a workspace.
func (c *Client) GetWorkspace(ctx context.Context, name string) (*api.Workspace, error) {
	var out api.Workspace
	if err := c.send(ctx, request{method: "GET", path: "/v1/workspaces/" + url.PathEscape(name), retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// UpdateWorkspace replaces a workspace's mutable fields.
func (c *Client) UpdateWorkspace(ctx context.Context, name string, upd api.WorkspaceUpdate) (*api.Workspace, error) {
	var out api.Workspace
	if err := c.send(ctx, request{method: "PUT", path: "/v1/workspaces/" + url.PathEscape(name), body: upd, retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteWorkspace deletes a workspace; force also deletes what it holds.
func (c *Client) DeleteWorkspace(ctx context.Context, name string, force bool) error {
	q := url.Values{}
	if force {
		q.Set("force", "true")
	}
	return c.send(ctx, request{method: "DELETE", path: "/v1/workspaces/" + url.PathEscape(name), query: q, retry: true}, nil)
}

// ListSizes lists the catalog entries matching f.
func (c *Client) ListSizes(ctx context.Context, f api.SizeFilter) ([]api.VMSize, error) {
	var out api.SizeList
	if err := c.send(ctx, request{method: "GET", path: "/v1/sizes", query: api.EncodeSizeFilter(f), retry: true}, &out); err != nil {
		return nil, err
	}
	return out.Sizes, nil
}

// ListIsolatedSizes lists the isolated catalog entries.
func (c *Client) ListIsolatedSizes(ctx context.Context) ([]api.VMSize, error) {
	var out api.SizeList
	if err := c.send(ctx, request{method: "GET", path: "/v1/sizes/isolated", retry: true}, &out); err != nil {
		return nil, err
	}
	return out.Sizes, nil
}

// CreateUILogin asks for a one-time login code for the status page (/ui).
func (c *Client) CreateUILogin(ctx context.Context) (*api.UILogin, error) {
	var out api.UILogin
	if err := c.send(ctx, request{method: http.MethodPost, path: "/v1/ui/logins"}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
