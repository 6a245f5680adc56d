package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// DeleteJob removes a finished job's record and its references to outputs; the engine
// then collects the stored files nothing references. A job that has not finished is a
// conflict.
func (c *Client) DeleteJob(ctx context.Context, workspace, id string) error {
	return c.send(ctx, request{method: "DELETE", path: jobsPath(workspace) + "/" + url.PathEscape(id), retry: true}, nil)
}

// GetJobOutput returns what a Completed job's registered output is (its digest, size and
// file count), without its files. An unknown job or output is a not-found error and a job
// that is not Completed a conflict, each naming it.
func (c *Client) GetJobOutput(ctx context.Context, workspace, id, output string) (*api.JobOutput, error) {
	var out api.JobOutput
	target := jobsPath(workspace) + "/" + url.PathEscape(id) + "/outputs/" + url.PathEscape(output) + "/metadata"
	if err := c.send(ctx, request{method: "GET", path: target, retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DownloadJobOutput opens a Completed job's registered output as a tar stream (a
// uri_folder's files with names relative to it, a uri_file's one file). The output's
// digest, size and file count come from the response's headers. The caller closes the
// stream; a stream cut short ends in an error of its last Read.
func (c *Client) DownloadJobOutput(ctx context.Context, workspace, id, output string) (*api.JobOutput, io.ReadCloser, error) {
	target := c.base + jobsPath(workspace) + "/" + url.PathEscape(id) + "/outputs/" + url.PathEscape(output)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("building request: %w", err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, nil, &transportError{fmt.Errorf("calling engine at %s: %w", c.endpoint, err)}
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, nil, decodeError(resp.StatusCode, raw)
	}
	out := &api.JobOutput{Digest: resp.Header.Get(api.OutputDigestHeader)}
	out.Size, _ = strconv.ParseInt(resp.Header.Get(api.OutputSizeHeader), 10, 64)
	out.FileCount, _ = strconv.ParseInt(resp.Header.Get(api.OutputFileCountHeader), 10, 64)
	return out, resp.Body, nil
}
