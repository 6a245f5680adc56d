package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

func computesPath(workspace string) string {
	return "/v1/workspaces/" + url.PathEscape(workspace) + "/computes"
}

func jobsPath(workspace string) string {
	return "/v1/workspaces/" + url.PathEscape(workspace) + "/jobs"
}

func idempotent() http.Header {
	h := http.Header{}
	h.Set(api.IdempotencyKeyHeader, newIdempotencyKey())
	return h
}

// ListComputes lists a workspace's computes.
func (c *Client) ListComputes(ctx context.Context, workspace string) ([]api.Compute, error) {
	var out api.ComputeList
	if err := c.send(ctx, request{method: "GET", path: computesPath(workspace), retry: true}, &out); err != nil {
		return nil, err
	}
	return out.Computes, nil
}

// CreateCompute creates a compute; one idempotency key covers every retry.
func (c *Client) CreateCompute(ctx context.Context, workspace string, spec api.ComputeSpec) (*api.Compute, error) {
	var out api.Compute
	if err := c.send(ctx, request{method: "POST", path: computesPath(workspace), body: spec, header: idempotent(), retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetCompute returns a compute with its runtime state.
func (c *Client) GetCompute(ctx context.Context, workspace, name string) (*api.Compute, error) {
	var out api.Compute
	if err := c.send(ctx, request{method: "GET", path: computesPath(workspace) + "/" + url.PathEscape(name), retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// UpdateCompute replaces a compute's description, tags and scale settings.
func (c *Client) UpdateCompute(ctx context.Context, workspace, name string, upd api.ComputeUpdate) (*api.Compute, error) {
	var out api.Compute
	if err := c.send(ctx, request{method: "PUT", path: computesPath(workspace) + "/" + url.PathEscape(name), body: upd, retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteCompute deletes a compute and returns once its nodes are released.
func (c *Client) DeleteCompute(ctx context.Context, workspace, name string) error {
	return c.send(ctx, request{method: "DELETE", path: computesPath(workspace) + "/" + url.PathEscape(name), retry: true}, nil)
}

// PutSnapshot uploads a gzip'd tar of a code directory and returns its ID.
func (c *Client) PutSnapshot(ctx context.Context, workspace string, archive []byte) (string, error) {
	var out api.SnapshotRef
	err := c.send(ctx, request{method: "POST", path: "/v1/workspaces/" + url.PathEscape(workspace) + "/snapshots", raw: archive, retry: true}, &out)
	return out.ID, err
}

// SubmitJob queues a job; one idempotency key covers every retry.
func (c *Client) SubmitJob(ctx context.Context, workspace string, spec api.JobSpec) (*api.Job, error) {
	var out api.Job
	if err := c.send(ctx, request{method: "POST", path: jobsPath(workspace), body: spec, header: idempotent(), retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListJobs lists a workspace's jobs, newest first.
func (c *Client) ListJobs(ctx context.Context, workspace string) ([]api.Job, error) {
	var out api.JobList
	if err := c.send(ctx, request{method: "GET", path: jobsPath(workspace), retry: true}, &out); err != nil {
		return nil, err
	}
	return out.Jobs, nil
}

// History returns the last hour's samples of a workspace's computes and deployments.
func (c *Client) History(ctx context.Context, workspace string) (*api.History, error) {
	var out api.History
	if err := c.send(ctx, request{method: "GET", path: "/v1/workspaces/" + url.PathEscape(workspace) + "/history", retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetJob returns a job.
func (c *Client) GetJob(ctx context.Context, workspace, id string) (*api.Job, error) {
	var out api.Job
	if err := c.send(ctx, request{method: "GET", path: jobsPath(workspace) + "/" + url.PathEscape(id), retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CancelJob cancels a job.
func (c *Client) CancelJob(ctx context.Context, workspace, id string) (*api.Job, error) {
	var out api.Job
	if err := c.send(ctx, request{method: "POST", path: jobsPath(workspace) + "/" + url.PathEscape(id) + "/cancel", retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RerunJob submits a new run of a pipeline job (api.RerunRequest) and returns it.
func (c *Client) RerunJob(ctx context.Context, workspace, id string, req api.RerunRequest) (*api.Job, error) {
	var out api.Job
	if err := c.send(ctx, request{method: "POST", path: jobsPath(workspace) + "/" + url.PathEscape(id) + "/rerun", body: req}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// JobLogs returns a rank's output from offset.
func (c *Client) JobLogs(ctx context.Context, workspace, id string, rank int, offset int64) (*api.LogChunk, error) {
	q := url.Values{}
	q.Set("rank", strconv.Itoa(rank))
	q.Set("offset", strconv.FormatInt(offset, 10))
	var out api.LogChunk
	if err := c.send(ctx, request{method: "GET", path: jobsPath(workspace) + "/" + url.PathEscape(id) + "/logs", query: q, retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// InstanceAction starts, stops or restarts a compute instance (api.ActionStart, ...).
func (c *Client) InstanceAction(ctx context.Context, workspace, name, action string) (*api.Compute, error) {
	var out api.Compute
	if err := c.send(ctx, request{method: "POST", path: computesPath(workspace) + "/" + url.PathEscape(name) + "/" + url.PathEscape(action), retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ReportActivity tells the engine an application on the instance is in use, which delays
// its idle shutdown.
func (c *Client) ReportActivity(ctx context.Context, workspace, name string) error {
	return c.send(ctx, request{method: "POST", path: computesPath(workspace) + "/" + url.PathEscape(name) + "/activity", retry: true}, nil)
}

// Exec opens an interactive session on a compute instance: stdin is sent until it ends,
// output is written to out, and the command's exit status is returned.
func (c *Client) Exec(ctx context.Context, workspace, name string, command []string, stdin io.Reader, out io.Writer) (int, error) {
	q := url.Values{"arg": command}
	target := c.base + computesPath(workspace) + "/" + url.PathEscape(name) + "/exec?" + q.Encode()
	req, err := http.NewRequestWithContext(ctx, "POST", target, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", api.ExecProtocol)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, &transportError{fmt.Errorf("calling engine at %s: %w", c.endpoint, err)}
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return 0, decodeError(resp.StatusCode, raw)
	}
	conn, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		resp.Body.Close()
		return 0, fmt.Errorf("engine did not upgrade the connection")
	}
	defer conn.Close()
	var mu sync.Mutex
	send := func(kind byte, p []byte) error {
		mu.Lock()
		defer mu.Unlock()
		return api.WriteFrame(conn, kind, p)
	}
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := stdin.Read(buf)
			if n > 0 && send(api.FrameStdin, buf[:n]) != nil {
				return
			}
			if err != nil {
				_ = send(api.FrameStdinEOF, nil)
				return
			}
		}
	}()
	for {
		kind, payload, err := api.ReadFrame(conn)
		if err != nil {
			return 0, &transportError{fmt.Errorf("session with %s ended: %w", c.endpoint, err)}
		}
		switch kind {
		case api.FrameOutput:
			if _, err := out.Write(payload); err != nil {
				return 0, err
			}
		case api.FrameExit:
			return api.DecodeExitCode(payload), nil
		case api.FrameError:
			return 0, fmt.Errorf("session failed: %s", payload)
		}
	}
}

// CheckQuota asks whether a planned compute cluster or endpoint's deployments fit the
// workspace's quota, as their create or update would; nil when they do, else the engine's
// error (api.IsQuotaExceeded, with api.FieldOf naming the input to change).
func (c *Client) CheckQuota(ctx context.Context, workspace string, check api.QuotaCheck) error {
	return c.send(ctx, request{method: "POST", path: "/v1/workspaces/" + url.PathEscape(workspace) + "/quota:check", body: check, retry: true}, nil)
}
