package nodeagent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/nodeagent/proc"
)

// ErrNotFound is returned by the client when the agent does not know a task.
var ErrNotFound = errors.New("not found")

// ErrUnreachable is returned by the client when nothing answers on the agent's socket, or
// the agent went away during a call. Whether the agent is dead is for the caller to
// decide (the socket of a starting or stopping agent does not answer either).
var ErrUnreachable = errors.New("node agent unreachable")

// APIError is a non-2xx answer from the agent.
type APIError struct {
	Status  int
	Code    string
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("node agent: %s (%s, HTTP %d)", e.Message, e.Code, e.Status)
}

// Unwrap makes errors.Is(err, ErrNotFound) true for a not_found answer.
func (e *APIError) Unwrap() error {
	if e.Code == "not_found" {
		return ErrNotFound
	}
	return nil
}

// Client talks to the agent of one node directory over its unix socket. It is safe for
// concurrent use; long polls (Wait) each hold one connection.
type Client struct {
	dir  string
	http *http.Client
}

// NewClient returns a client for the agent serving nodeDir/agent.sock.
func NewClient(nodeDir string) *Client {
	sock := filepath.Join(nodeDir, SocketFile)
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var conn net.Conn
			err := proc.WithSocketPath(sock, func(path string) error {
				var d net.Dialer
				var err error
				conn, err = d.DialContext(ctx, "unix", path)
				return err
			})
			return conn, err
		},
		MaxIdleConnsPerHost: 4,
		DisableCompression:  true,
	}
	return &Client{dir: nodeDir, http: &http.Client{Transport: tr}}
}

// Dir is the node directory the client talks to.
func (c *Client) Dir() string { return c.dir }

// CloseIdleConnections drops pooled connections.
func (c *Client) CloseIdleConnections() { c.http.CloseIdleConnections() }

// Info returns the agent's pid, start time and tasks.
func (c *Client) Info(ctx context.Context) (*Info, error) {
	var out Info
	if err := c.send(ctx, http.MethodGet, "/v1/info", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// StartTask starts a task, or returns the state of the task already known under req.Key.
func (c *Client) StartTask(ctx context.Context, req TaskRequest) (*TaskState, error) {
	var out TaskState
	if err := c.send(ctx, http.MethodPost, "/v1/tasks", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Tasks lists every task the agent knows, running or ended.
func (c *Client) Tasks(ctx context.Context) ([]TaskState, error) {
	var out []TaskState
	if err := c.send(ctx, http.MethodGet, "/v1/tasks", nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// Task returns one task's state.
func (c *Client) Task(ctx context.Context, key string) (*TaskState, error) {
	var out TaskState
	if err := c.send(ctx, http.MethodGet, taskPath(key, ""), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Kill SIGKILLs the task's process group and returns its state once it has ended.
func (c *Client) Kill(ctx context.Context, key string) (*TaskState, error) {
	var out TaskState
	if err := c.send(ctx, http.MethodPost, taskPath(key, "/kill"), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Wait blocks until the task has ended and returns its final state. It holds a request
// open for as long as the task runs; cancel ctx to give up.
func (c *Client) Wait(ctx context.Context, key string) (*TaskState, error) {
	var out TaskState
	if err := c.send(ctx, http.MethodGet, taskPath(key, "/wait"), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Output returns up to MaxOutputChunk bytes of the task's output from offset on.
func (c *Client) Output(ctx context.Context, key string, offset int64) ([]byte, error) {
	var out []byte
	err := c.send(ctx, http.MethodGet, taskPath(key, "/output")+"?offset="+strconv.FormatInt(offset, 10), nil, &out)
	return out, err
}

func taskPath(key, suffix string) string {
	return "/v1/tasks/" + url.PathEscape(key) + suffix
}

func (c *Client) send(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encoding request: %w", err)
		}
		body = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://node-agent"+path, body)
	if err != nil {
		return fmt.Errorf("building request: %w", err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: reading answer: %v", ErrUnreachable, err)
	}
	if resp.StatusCode/100 != 2 {
		var eb ErrorBody
		if json.Unmarshal(raw, &eb) != nil || eb.Code == "" {
			eb = ErrorBody{Code: "internal", Message: string(bytes.TrimSpace(raw))}
		}
		return &APIError{Status: resp.StatusCode, Code: eb.Code, Message: eb.Message}
	}
	if b, ok := out.(*[]byte); ok {
		*b = raw
		return nil
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("decoding answer to %s %s: %w", method, path, err)
		}
	}
	return nil
}
