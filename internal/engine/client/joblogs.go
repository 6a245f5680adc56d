package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// FollowJobLogs writes a rank's output from offset on to w as the engine streams it, and
// returns once the job has ended and its output is all written, with the offset after the
// last byte. Nothing is polled: the engine pushes each piece as it appears. A stream cut
// short (the engine restarted, a connection dropped) is followed again from the offset
// reached, with the client's usual retries for transport failures; an error of the
// engine's (no such job) or of w ends it.
func (c *Client) FollowJobLogs(ctx context.Context, workspace, id string, rank int, offset int64, w io.Writer) (int64, error) {
	q := url.Values{}
	q.Set("rank", strconv.Itoa(rank))
	q.Set("follow", "true")
	failures := 0
	for {
		q.Set("offset", strconv.FormatInt(offset, 10))
		target := c.base + jobsPath(workspace) + "/" + url.PathEscape(id) + "/logs?" + q.Encode()
		before := offset
		complete, legacy, err := c.followOnce(ctx, target, &offset, w)
		switch {
		case complete:
			return offset, nil
		case err == nil: // the stream ended without its trailer: cut short
			if offset > before || legacy {
				failures = 0
			} else if failures++; failures >= c.attempts {
				return offset, &transportError{errors.New("the engine ended the job's output stream early, repeatedly")}
			}
		case !isTransport(err) || ctx.Err() != nil:
			return offset, err
		default:
			if failures++; failures >= c.attempts {
				return offset, err
			}
			if c.reconnect != nil {
				if rerr := c.reconnect(ctx); rerr != nil {
					return offset, fmt.Errorf("%w (reconnecting: %v)", err, rerr)
				}
			}
		}
	}
}

// followOnce reads one stream, advancing *offset by every byte written to w, and reports
// whether it ended with the engine's "complete" trailer, and whether the engine answered
// with one chunk instead of a stream (legacy).
func (c *Client) followOnce(ctx context.Context, target string, offset *int64, w io.Writer) (complete, legacy bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return false, false, fmt.Errorf("building request: %w", err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return false, false, &transportError{fmt.Errorf("calling engine at %s: %w", c.endpoint, err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return false, false, decodeError(resp.StatusCode, raw)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		// An engine from before streaming answers with one chunk, as without follow=true.
		complete, err := c.pollChunk(ctx, resp.Body, offset, w)
		return complete, true, err
	}
	buf := make([]byte, 32<<10)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return false, false, err
			}
			*offset += int64(n)
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return false, false, &transportError{fmt.Errorf("reading job output from engine: %w", rerr)}
		}
	}
	if resp.Trailer.Get(api.LogCompleteTrailer) != "true" {
		return false, false, nil
	}
	if next, err := strconv.ParseInt(resp.Trailer.Get(api.LogNextOffsetTrailer), 10, 64); err == nil {
		*offset = next
	}
	return true, false, nil
}

// pollChunk handles the answer of an engine that does not stream: one api.LogChunk. It
// writes the chunk and, unless the output is complete, waits a moment before the caller
// asks again, as clients did before streaming.
func (c *Client) pollChunk(ctx context.Context, body io.Reader, offset *int64, w io.Writer) (bool, error) {
	var chunk api.LogChunk
	if err := json.NewDecoder(io.LimitReader(body, 64<<20)).Decode(&chunk); err != nil {
		return false, fmt.Errorf("decoding engine response: %w", err)
	}
	if _, err := w.Write(chunk.Data); err != nil {
		return false, err
	}
	*offset = chunk.NextOffset
	if chunk.Complete {
		return true, nil
	}
	select {
	case <-ctx.Done():
		return false, ctx.Err()
	case <-c.clock.After(legacyPollInterval):
	}
	return false, nil
}

// legacyPollInterval spaces the calls to an engine that does not stream job output.
const legacyPollInterval = 50 * time.Millisecond
