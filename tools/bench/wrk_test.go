//go:build unix

package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The testdata files are wrk 4.1.0 (Debian 12) output recorded verbatim: a run of this
// benchmark's load against its model server, a run against a server that is sometimes
// slow (seconds), fails (500) or never answers within wrk's 2s timeout, and a run
// without --latency.
func readWrkSample(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseWrk_Loopback(t *testing.T) {
	res, err := parseWrk(readWrkSample(t, "wrk-loopback.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if res.RequestsPerSec != 92644.15 {
		t.Errorf("RequestsPerSec = %v, want 92644.15", res.RequestsPerSec)
	}
	if res.Requests != 464424 || res.Duration != 5010*time.Millisecond {
		t.Errorf("Requests, Duration = %d, %s; want 464424, 5.01s", res.Requests, res.Duration)
	}
	// The distribution mixes units: 283.00us, then ms.
	want := map[float64]time.Duration{
		50: 283 * time.Microsecond,
		75: 1450 * time.Microsecond,
		90: 4100 * time.Microsecond,
		99: 10910 * time.Microsecond,
	}
	for p, d := range want {
		if got := res.Percentile(p); got != d {
			t.Errorf("p%v = %s, want %s", p, got, d)
		}
	}
	if len(res.Percentiles) != len(want) {
		t.Errorf("Percentiles = %v, want exactly %v", res.Percentiles, want)
	}
	if why := res.Failed(); why != "" {
		t.Errorf("Failed() = %q for a clean run", why)
	}
}

func TestParseWrk_SlowWithErrors(t *testing.T) {
	res, err := parseWrk(readWrkSample(t, "wrk-slow-errors.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if res.RequestsPerSec != 138.01 || res.Requests != 829 || res.Duration != 6010*time.Millisecond {
		t.Errorf("RequestsPerSec, Requests, Duration = %v, %d, %s; want 138.01, 829, 6.01s",
			res.RequestsPerSec, res.Requests, res.Duration)
	}
	// "99%    1.20s " (wrk pads the one-letter unit) and a three-digit ms value.
	if got := res.Percentile(99); got != 1200*time.Millisecond {
		t.Errorf("p99 = %s, want 1.2s", got)
	}
	if got := res.Percentile(75); got != 494330*time.Microsecond {
		t.Errorf("p75 = %s, want 494.33ms", got)
	}
	if res.Non2xx != 155 || res.Timeouts != 5 || res.ConnectErrors+res.ReadErrors+res.WriteErrors != 0 {
		t.Errorf("Non2xx %d, socket errors %d/%d/%d/%d; want 155 and 0/0/0/5",
			res.Non2xx, res.ConnectErrors, res.ReadErrors, res.WriteErrors, res.Timeouts)
	}
	why := res.Failed()
	for _, s := range []string{"155 responses", "timeout 5"} {
		if !strings.Contains(why, s) {
			t.Errorf("Failed() = %q, want it to mention %q", why, s)
		}
	}
}

func TestParseWrk_NeedsLatencyFlag(t *testing.T) {
	_, err := parseWrk(readWrkSample(t, "wrk-no-latency-flag.txt"))
	if err == nil || !strings.Contains(err.Error(), "--latency") {
		t.Fatalf("err = %v, want one that asks for --latency", err)
	}
}

func TestParseWrk_Malformed(t *testing.T) {
	sample := readWrkSample(t, "wrk-loopback.txt")
	for name, tc := range map[string]struct{ out, want string }{
		"empty":          {"", "no Requests/sec"},
		"cut before end": {sample[:strings.Index(sample, "Requests/sec")], "no Requests/sec"},
		"unknown unit":   {strings.Replace(sample, "283.00us", "283.00xs", 1), "283.00xs"},
		"bad rate":       {strings.Replace(sample, "92644.15", "-nan", 1), "Requests/sec"},
		"nan rate":       {strings.Replace(sample, "92644.15", "nan", 1), "not a rate"},
		"bad socket":     {strings.Replace(sample, "Requests/sec", "  Socket errors: connect 0, reset 2\nRequests/sec", 1), "reset"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parseWrk(tc.out)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// wrk picks the unit by magnitude (units.c): us, ms, s, and m or h past a minute.
func TestParseWrk_Units(t *testing.T) {
	out := "  Latency Distribution\n" +
		"     50%    0.00us\n" +
		"     75%  999.99us\n" +
		"     90%    1.00ms\n" +
		"     99%    2.50s \n" +
		"     99.9%    1.50m \n" +
		"Requests/sec:      1.00\n"
	res, err := parseWrk(out)
	if err != nil {
		t.Fatal(err)
	}
	want := map[float64]time.Duration{
		50:   0,
		75:   999990 * time.Nanosecond,
		90:   time.Millisecond,
		99:   2500 * time.Millisecond,
		99.9: 90 * time.Second,
	}
	for p, d := range want {
		if got, ok := res.Percentiles[p]; !ok || got != d {
			t.Errorf("p%v = %s (present %v), want %s", p, got, ok, d)
		}
	}
}

func TestWrkLoadArgs(t *testing.T) {
	l := wrkLoad{Threads: 2, Connections: 32, Script: "post.lua", Header: "Authorization: Bearer k"}
	got := l.args("http://127.0.0.1:1/bench/score", 10*time.Second)
	want := []string{"-t", "2", "-c", "32", "-d", "10s", "--latency",
		"-H", "Authorization: Bearer k", "-s", "post.lua", "http://127.0.0.1:1/bench/score"}
	if !slices.Equal(got, want) {
		t.Errorf("args = %q, want %q", got, want)
	}
}
