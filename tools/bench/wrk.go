//go:build unix

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// wrkResult is what one wrk run printed (wrk 4.x with --latency).
type wrkResult struct {
	// Requests completed and the time they took ("559245 requests in 10.01s").
	Requests int64
	Duration time.Duration
	// RequestsPerSec is the "Requests/sec:" line: Requests / Duration, unrounded.
	RequestsPerSec float64
	// Percentiles maps a percentile of the "Latency Distribution" block (50, 75, 90, 99)
	// to its latency.
	Percentiles map[float64]time.Duration
	// Non2xx counts responses that were neither 2xx nor 3xx; wrk counts them as requests.
	Non2xx int64
	// Socket errors: connections that could not be opened, reads and writes that failed,
	// and requests that got no answer within wrk's --timeout.
	ConnectErrors, ReadErrors, WriteErrors, Timeouts int64
	// CPU time (user and system) spent during the run by wrk itself, by the target's proxy
	// processes and by the model server; the last two are set by scoringRuns.
	WrkCPU, ProxyCPU, BackendCPU time.Duration
}

// Percentile returns the latency at percentile p, or 0 when wrk did not print it.
func (r wrkResult) Percentile(p float64) time.Duration { return r.Percentiles[p] }

// Failed describes why the run's numbers do not measure successful requests, or is "".
// A proxy that answers 401 or 502 quickly would otherwise look fast.
func (r wrkResult) Failed() string {
	var why []string
	if r.Non2xx > 0 {
		why = append(why, fmt.Sprintf("%d responses were not 2xx or 3xx", r.Non2xx))
	}
	if n := r.ConnectErrors + r.ReadErrors + r.WriteErrors + r.Timeouts; n > 0 {
		why = append(why, fmt.Sprintf("%d socket errors (connect %d, read %d, write %d, timeout %d)",
			n, r.ConnectErrors, r.ReadErrors, r.WriteErrors, r.Timeouts))
	}
	return strings.Join(why, "; ")
}

// parseWrk reads wrk's report. It needs the "Requests/sec" line and, since the benchmark
// compares percentiles, the "Latency Distribution" block that --latency adds.
//
// wrk prints latencies with two decimals and a unit chosen by magnitude: "us" below a
// millisecond, "ms" below a second, then "s", "m" and "h" (wrk's units.c), which are
// exactly time.ParseDuration's spellings.
func parseWrk(out string) (wrkResult, error) {
	res := wrkResult{Percentiles: map[float64]time.Duration{}}
	var haveRPS, inDistribution bool
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		fields := strings.Fields(line)
		switch {
		case line == "Latency Distribution":
			inDistribution = true
			continue
		case inDistribution && len(fields) == 2 && strings.HasSuffix(fields[0], "%"):
			p, err := strconv.ParseFloat(strings.TrimSuffix(fields[0], "%"), 64)
			if err != nil {
				return res, fmt.Errorf("wrk latency distribution line %q: %w", line, err)
			}
			d, err := time.ParseDuration(fields[1])
			if err != nil {
				return res, fmt.Errorf("wrk latency distribution line %q: %w", line, err)
			}
			res.Percentiles[p] = d
			continue
		}
		inDistribution = false
		switch {
		case strings.HasPrefix(line, "Requests/sec:"):
			v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(line, "Requests/sec:")), 64)
			if err == nil && (math.IsNaN(v) || math.IsInf(v, 0)) {
				// glibc prints nan when wrk completed no request.
				err = errors.New("not a rate")
			}
			if err != nil {
				return res, fmt.Errorf("wrk line %q: %w", line, err)
			}
			res.RequestsPerSec, haveRPS = v, true
		case len(fields) >= 4 && fields[1] == "requests" && fields[2] == "in":
			// "559245 requests in 10.01s, 67.17MB read"
			n, err := strconv.ParseInt(fields[0], 10, 64)
			if err != nil {
				return res, fmt.Errorf("wrk line %q: %w", line, err)
			}
			d, err := time.ParseDuration(strings.TrimSuffix(fields[3], ","))
			if err != nil {
				return res, fmt.Errorf("wrk line %q: %w", line, err)
			}
			res.Requests, res.Duration = n, d
		case strings.HasPrefix(line, "Non-2xx or 3xx responses:"):
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(line, "Non-2xx or 3xx responses:")), 10, 64)
			if err != nil {
				return res, fmt.Errorf("wrk line %q: %w", line, err)
			}
			res.Non2xx = n
		case strings.HasPrefix(line, "Socket errors:"):
			// "Socket errors: connect 0, read 0, write 0, timeout 12"
			for _, part := range strings.Split(strings.TrimPrefix(line, "Socket errors:"), ",") {
				kv := strings.Fields(part)
				if len(kv) != 2 {
					return res, fmt.Errorf("wrk line %q: unexpected %q", line, part)
				}
				n, err := strconv.ParseInt(kv[1], 10, 64)
				if err != nil {
					return res, fmt.Errorf("wrk line %q: %w", line, err)
				}
				switch kv[0] {
				case "connect":
					res.ConnectErrors = n
				case "read":
					res.ReadErrors = n
				case "write":
					res.WriteErrors = n
				case "timeout":
					res.Timeouts = n
				default:
					return res, fmt.Errorf("wrk line %q: unknown socket error kind %q", line, kv[0])
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return res, err
	}
	if !haveRPS {
		return res, errors.New("wrk printed no Requests/sec line")
	}
	if len(res.Percentiles) == 0 {
		return res, errors.New("wrk printed no latency distribution (run it with --latency)")
	}
	return res, nil
}

// wrkLoad is the load every target gets: the same wrk settings, script and header.
type wrkLoad struct {
	Binary      string
	Threads     int
	Connections int
	Script      string // Lua script that makes each request a POST with the payload
	Header      string // one extra request header, "Name: value"
}

// args returns wrk's command line for url and a run of d (whole seconds: wrk's -d takes
// s, m or h).
func (l wrkLoad) args(url string, d time.Duration) []string {
	return []string{
		"-t", strconv.Itoa(l.Threads), "-c", strconv.Itoa(l.Connections),
		"-d", fmt.Sprintf("%ds", int(d/time.Second)), "--latency",
		"-H", l.Header, "-s", l.Script, url,
	}
}

// run runs wrk against url for d and parses its report; a run with failed requests or
// socket errors is an error, since its numbers would not measure the target's work.
func (l wrkLoad) run(ctx context.Context, url string, d time.Duration) (wrkResult, error) {
	cmd := exec.CommandContext(ctx, l.Binary, l.args(url, d)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return wrkResult{}, fmt.Errorf("wrk %s: %w\n%s", url, err, tail(string(out), 20))
	}
	res, err := parseWrk(string(out))
	if err != nil {
		return res, fmt.Errorf("wrk %s: %w\n%s", url, err, tail(string(out), 20))
	}
	if why := res.Failed(); why != "" {
		return res, fmt.Errorf("wrk %s: %s\n%s", url, why, tail(string(out), 20))
	}
	res.WrkCPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return res, nil
}
