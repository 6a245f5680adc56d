//go:build unix

package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/daemon"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router/leanserver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/tlsconfig"
)

// The scoring benchmark (-mode router) sends the same wrk load over loopback to one model
// server directly, through nginx as a reverse proxy, through the engine's scoring router,
// and through the two floor proxies (floor.go: what a proxy doing nothing but forwarding
// bytes reaches with Go's net package, and with an epoll event loop), and compares
// throughput, latency percentiles and CPU time per request. The model server runs
// in its own process (this binary with -serve-backend), so the router, nginx and the
// model server each have their own process, as in production.
//
// It takes two passes. The loaded one (-wrk-threads, -wrk-connections, -wrk-duration)
// gives throughput and latency under a saturating load, where latency is mostly queueing.
// The unloaded one (one connection, -unloaded-duration) gives the latency each proxy adds
// to a single request.

const (
	scoringEndpoint   = "bench"
	scoringDeployment = "blue"
	// scoringPayload is the request body, the one the router's Go benchmark sends.
	scoringPayload = `{"input_data":{"columns":["a","b","c"],"data":[[1,2,3],[4,5,6]]}}`
	// scoringAnswer is the model server's answer to every request.
	scoringAnswer = `{"predictions":[0.1,0.9]}`
	// scoringWarmup is an untimed wrk run per target before the timed runs: it opens the
	// keep-alive pools and lets the Go runtimes size their heaps.
	scoringWarmup = 2 * time.Second
)

// wrkScript makes every wrk request a POST of scoringPayload.
var wrkScript = fmt.Sprintf(`wrk.method = "POST"
wrk.body = '%s'
wrk.headers["Content-Type"] = "application/json"
`, scoringPayload)

// scoringTarget is one way of reaching the model server.
type scoringTarget struct {
	Name string
	URL  string
	// Procs lists the target's proxy processes (none for the direct path).
	Procs func() []int
}

// The passes of -mode router (-router-pass): plain HTTP, as the engine serves scoring on
// loopback by default, and TLS, as it serves it with --tls or off loopback.
var routerPasses = []string{"all", "plain", "tls"}

// runScoring is -mode router: the plain pass, then the TLS pass, each against its own nginx.
func runScoring(ctx context.Context, o options) (err error) {
	if o.wrkThreads < 1 || o.wrkConns < o.wrkThreads {
		return errors.New("-wrk-threads must be at least 1 and -wrk-connections at least -wrk-threads")
	}
	if o.wrkDuration < time.Second || o.wrkDuration%time.Second != 0 {
		return fmt.Errorf("-wrk-duration must be whole seconds, at least 1s (got %s)", o.wrkDuration)
	}
	if o.unloadedDuration < 0 || o.unloadedDuration%time.Second != 0 {
		return fmt.Errorf("-unloaded-duration must be whole seconds, or 0 to skip (got %s)", o.unloadedDuration)
	}
	if o.runs < 1 {
		return errors.New("-runs must be at least 1")
	}
	if !slices.Contains(routerPasses, o.routerPass) {
		return fmt.Errorf("-router-pass %q: must be one of %s", o.routerPass, strings.Join(routerPasses, ", "))
	}
	wrk, err := lookTool(o.wrk)
	if err != nil {
		return err
	}
	nginx, err := lookTool(o.nginx)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "mlcompute-bench-scoring-")
	if err != nil {
		return err
	}
	defer func() {
		if o.keepDir {
			fmt.Fprintf(os.Stderr, "kept %s\n", dir)
		} else if rerr := os.RemoveAll(dir); err == nil {
			err = rerr
		}
	}()
	key, err := randomKey()
	if err != nil {
		return err
	}
	script := filepath.Join(dir, "post.lua")
	if err := os.WriteFile(script, []byte(wrkScript), 0o644); err != nil {
		return err
	}

	backend, err := startBackend()
	if err != nil {
		return err
	}
	defer func() {
		if serr := backend.stop(); err == nil {
			err = serr
		}
	}()

	p := scoringPass{o: o, wrk: wrk, nginx: nginx, key: key, script: script, backend: backend}
	if o.routerPass != "tls" {
		p.dir = filepath.Join(dir, "plain")
		if err := p.run(ctx); err != nil {
			return err
		}
	}
	if o.routerPass != "plain" {
		p.dir = filepath.Join(dir, "tls")
		if p.tls, err = makeBenchCert(p.dir); err != nil {
			return err
		}
		if err := p.run(ctx); err != nil {
			return fmt.Errorf("TLS pass: %w", err)
		}
	}
	return nil
}

// scoringPass is one pass of -mode router: the model server reached directly, through
// nginx and through the router, plain or over TLS, and in the plain pass through the floors.
type scoringPass struct {
	o           options
	wrk, nginx  string
	key, script string
	backend     *helperProc
	dir         string    // the pass's scratch dir (nginx's config, pid and logs)
	tls         *benchTLS // nil for the plain pass
}

// run starts the pass's proxies, measures them and prints its tables.
func (p scoringPass) run(ctx context.Context) (err error) {
	o := p.o
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return err
	}
	scheme, suffix, profile := "http", "", o.cpuProfile
	if p.tls != nil {
		scheme, suffix, profile = "https", " (TLS)", tlsProfilePath(o.cpuProfile)
	}
	workers := runtime.GOMAXPROCS(0)
	cfg := routerConfig{Backend: p.backend.addr, Key: p.key, Conns: o.wrkConns, Profile: profile, Autoscale: o.routerAutoscale}
	if p.tls != nil {
		cfg.TLSCert, cfg.TLSKey = p.tls.CertFile, p.tls.KeyFile
	}
	rt, err := startRouterProc(cfg, workers)
	if err != nil {
		return err
	}
	defer func() {
		if serr := rt.stop(); err == nil {
			err = serr
		}
	}()

	userDirective, err := nginxUser()
	if err != nil {
		return err
	}
	port, err := freeLoopbackPort()
	if err != nil {
		return err
	}
	settings := nginxSettings{
		Dir:        p.dir,
		User:       userDirective,
		Workers:    workers,
		Listen:     "127.0.0.1:" + port,
		Backend:    p.backend.addr,
		Keepalive:  o.wrkConns,
		Path:       router.ScoringPath(scoringEndpoint),
		Key:        p.key,
		Deployment: scoringDeployment,
	}
	if p.tls != nil {
		settings.TLSCert, settings.TLSKey = p.tls.CertFile, p.tls.KeyFile
	}
	ngx, err := startNginx(p.nginx, settings)
	if err != nil {
		return err
	}
	defer func() {
		if serr := ngx.stop(); err == nil {
			err = serr
		}
	}()

	nginxName := nginxVersion(ctx, p.nginx)
	// In the order of directRow, nginxRow, routerRow, then the floors (floor.go). Besides
	// wrk and the model server, a target costs the CPU time of its proxy's processes.
	// The direct path is plain HTTP in both passes: the model server has no TLS.
	targets := []scoringTarget{
		{Name: "backend direct", URL: "http://" + p.backend.addr + "/score", Procs: func() []int { return nil }},
		{Name: nginxName + suffix, URL: scheme + "://127.0.0.1:" + port + router.ScoringPath(scoringEndpoint), Procs: ngx.pids},
		{Name: "mlcompute router" + suffix, URL: scheme + "://" + rt.addr + router.ScoringPath(scoringEndpoint), Procs: rt.pids},
	}
	// The floors forward bytes and speak no TLS: they bound the plain pass only.
	floors := floorModels
	if p.tls != nil {
		floors = nil
	}
	for _, model := range floors {
		fl, err := startFloorProc(model, p.backend.addr, workers)
		if err != nil {
			return err
		}
		defer func() {
			if serr := fl.stop(); err == nil {
				err = serr
			}
		}()
		targets = append(targets, scoringTarget{Name: "floor: " + model + ", bytes only", URL: "http://" + fl.addr + "/score", Procs: fl.pids})
	}
	client, err := p.tls.client()
	if err != nil {
		return err
	}
	defer client.CloseIdleConnections()
	backendPid := p.backend.cmd.Process.Pid
	for i, t := range targets {
		var exited func() error
		if i == nginxRow {
			exited = ngx.failure
		}
		if err := waitScoring(ctx, client, t.URL, p.key, exited); err != nil {
			return fmt.Errorf("%s: %w", t.Name, err)
		}
	}

	loaded := wrkLoad{
		Binary: p.wrk, Threads: o.wrkThreads, Connections: o.wrkConns,
		Script: p.script, Header: "Authorization: Bearer " + p.key,
	}
	for _, t := range targets {
		if _, err := loaded.run(ctx, t.URL, scoringWarmup); err != nil {
			return fmt.Errorf("%s: warm-up: %w", t.Name, err)
		}
	}

	if o.cpuProfile != "" {
		if err := rt.profile(true); err != nil {
			return err
		}
	}
	over := "loopback"
	if p.tls != nil {
		over = "loopback with TLS (" + p.tls.Describe + "; the model server plain)"
	}
	fmt.Printf("\nscoring over %s: wrk -t%d -c%d -d%s --latency, POST of %d bytes, median of %d runs, %d CPUs, %d nginx workers, router GOMAXPROCS %d and GOGC %d (the engine's), no CPU pinning\n",
		over, o.wrkThreads, o.wrkConns, o.wrkDuration, len(scoringPayload), o.runs, runtime.NumCPU(), workers, workers, daemon.GCPercent)
	results, err := scoringRuns(ctx, loaded, targets, backendPid, o.wrkDuration, o.runs)
	if o.cpuProfile != "" {
		// The profile covers the loaded runs only; the router served nothing else then.
		if perr := rt.profile(false); err == nil {
			err = perr
		}
	}
	if err != nil {
		return err
	}
	printThroughput(targets, results)
	printLatency("latency under that load", targets, results)
	printCPU(targets, results)

	if o.unloadedDuration > 0 {
		// One request at a time: nothing queues, so the difference from the direct path is
		// each proxy's own cost per request, not the queueing its lower throughput causes.
		one := loaded
		one.Threads, one.Connections = 1, 1
		fmt.Printf("\nscoring one request at a time%s: wrk -t1 -c1 -d%s --latency, median of %d runs\n",
			suffix, o.unloadedDuration, o.runs)
		results, err := scoringRuns(ctx, one, targets, backendPid, o.unloadedDuration, o.runs)
		if err != nil {
			return err
		}
		printLatency("latency, one request at a time", targets, results)
	}
	return nil
}

// tlsProfilePath is where the TLS pass writes the router's CPU profile: FILE-tls.EXT for
// -router-cpuprofile FILE.EXT, so that the plain pass's profile is kept.
func tlsProfilePath(path string) string {
	if path == "" {
		return ""
	}
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + "-tls" + ext
}

// scoringRuns runs the load against every target, runs times, and returns each target's
// results in run order.
func scoringRuns(ctx context.Context, load wrkLoad, targets []scoringTarget, backendPid int, d time.Duration, runs int) ([][]wrkResult, error) {
	results := make([][]wrkResult, len(targets))
	// Targets are interleaved within each run so that drift in machine load hits all alike.
	for r := 1; r <= runs; r++ {
		for i, t := range targets {
			procs := t.Procs()
			proxyBefore, err1 := procCPU(procs)
			backendBefore, err2 := procCPU([]int{backendPid})
			res, err := load.run(ctx, t.URL, d)
			if err != nil {
				return nil, fmt.Errorf("%s: run %d: %w", t.Name, r, err)
			}
			proxyAfter, err3 := procCPU(procs)
			backendAfter, err4 := procCPU([]int{backendPid})
			if err := errors.Join(err1, err2, err3, err4); err != nil {
				return nil, fmt.Errorf("%s: run %d: reading CPU times: %w", t.Name, r, err)
			}
			res.ProxyCPU, res.BackendCPU = proxyAfter-proxyBefore, backendAfter-backendBefore
			results[i] = append(results[i], res)
			fmt.Fprintf(os.Stderr, "run %d/%d -c%-3d %-24s %8.0f requests/s, p50 %s, p99 %s\n", r, runs,
				load.Connections, t.Name, res.RequestsPerSec, res.Percentile(50), res.Percentile(99))
		}
	}
	return results, nil
}

// The rows of the result tables, in the order of runScoring's targets; the floors follow
// (floor.go). Every row from routerRow on is compared with nginx.
const (
	directRow = iota
	nginxRow
	routerRow
)

// printThroughput prints each target's median requests/s and its ratio to the direct
// path and, for the router and the floors, to nginx.
func printThroughput(targets []scoringTarget, results [][]wrkResult) {
	rps := make([]float64, len(targets))
	for i, rs := range results {
		var r []float64
		for _, res := range rs {
			r = append(r, res.RequestsPerSec)
		}
		rps[i] = medianFloat(r)
	}
	fmt.Println()
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 3, ' ', 0)
	fmt.Fprintf(w, "throughput\trequests/s\truns (requests/s)\tvs direct\tvs %s\n", targets[nginxRow].Name)
	for i, t := range targets {
		var runs []string
		for _, res := range results[i] {
			runs = append(runs, fmt.Sprintf("%.0f", res.RequestsPerSec))
		}
		vsDirect, vsNginx := "", ""
		if i != directRow {
			vsDirect = fmt.Sprintf("%.2fx", rps[i]/rps[directRow])
		}
		if i >= routerRow {
			vsNginx = fmt.Sprintf("%.2fx", rps[i]/rps[nginxRow])
		}
		fmt.Fprintf(w, "%s\t%.0f\t%s\t%s\t%s\n", t.Name, rps[i], strings.Join(runs, " "), vsDirect, vsNginx)
	}
	w.Flush()
}

// printLatency prints each target's median p50 and p99 and the latency it adds over the
// direct path (its median minus the direct path's median).
func printLatency(title string, targets []scoringTarget, results [][]wrkResult) {
	p50 := make([]time.Duration, len(targets))
	p99 := make([]time.Duration, len(targets))
	for i, rs := range results {
		var a, b []time.Duration
		for _, res := range rs {
			a = append(a, res.Percentile(50))
			b = append(b, res.Percentile(99))
		}
		p50[i], p99[i] = median(a), median(b)
	}
	fmt.Println()
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 3, ' ', 0)
	fmt.Fprintf(w, "%s\tp50 (us)\tp99 (us)\tadded p50 (us)\tadded p99 (us)\truns p50 (us)\truns p99 (us)\n", title)
	for i, t := range targets {
		var runs50, runs99 []string
		for _, res := range results[i] {
			runs50 = append(runs50, fmt.Sprint(res.Percentile(50).Microseconds()))
			runs99 = append(runs99, fmt.Sprint(res.Percentile(99).Microseconds()))
		}
		added50, added99 := "", ""
		if i != directRow {
			added50 = fmt.Sprintf("%+d", (p50[i] - p50[directRow]).Microseconds())
			added99 = fmt.Sprintf("%+d", (p99[i] - p99[directRow]).Microseconds())
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%s\t%s\t%s\n", t.Name, p50[i].Microseconds(), p99[i].Microseconds(),
			added50, added99, strings.Join(runs50, " "), strings.Join(runs99, " "))
	}
	w.Flush()
}

func medianFloat(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// serveRouter serves the scoring router on a loopback port with one endpoint (key auth)
// whose one deployment has the backend as its one instance. Its concurrency limit is the
// connection count, so a full wrk load never gets 429. The request timeout is left at
// its default, as a user would: the timer it arms is part of the router's cost.
func serveRouter(backendAddr, key string, conns int) (addr string, stop func(), err error) {
	return serveRouterWith(routerConfig{Backend: backendAddr, Key: key, Conns: conns})
}

// serveRouterWith is serveRouter for cfg: with the deployment autoscaled when cfg.Autoscale
// is set (the router then holds requests that find no room, which none do under wrk's
// load; -router-autoscale measures the cost of that), and over TLS when cfg.TLSCert is set.
func serveRouterWith(cfg routerConfig) (addr string, stop func(), err error) {
	u, err := url.Parse("http://" + cfg.Backend)
	if err != nil {
		return "", nil, err
	}
	r := router.New(router.Options{Logger: hclog.NewNullLogger()})
	r.SetEndpoint(router.Endpoint{
		Name:     scoringEndpoint,
		AuthMode: router.AuthModeKey,
		Keys:     [2]string{cfg.Key, ""},
		Traffic:  map[string]int{scoringDeployment: 100},
		Deployments: map[string]*router.Deployment{scoringDeployment: {
			Backends:                 []router.Backend{{ID: "bench-0", URL: u, Ready: true}},
			MaxConcurrentPerInstance: cfg.Conns,
			Hold:                     benchHold(cfg.Autoscale, cfg.Conns),
		}},
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		r.Close()
		return "", nil, err
	}
	// As the engine serves it: on the event loops, with the lean server for the rest.
	srv := &router.LoopServer{Router: r, Fallback: &leanserver.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}}
	if cfg.TLSCert != "" {
		// As with --tls: the loops run the handshakes and crypto/tls's record layer. Failed
		// handshakes (wrk's connections closing at the end of each run) go to a logger at
		// debug, here one that drops them.
		tlsCfg, err := tlsconfig.Server(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			_ = ln.Close()
			r.Close()
			return "", nil, err
		}
		daemon.ScoringOverTLS(srv, tlsCfg, hclog.NewNullLogger())
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	return ln.Addr().String(), func() {
		_ = srv.Close()
		<-done
		r.Close()
	}, nil
}

// benchHold is the hold of an autoscaled deployment of one instance, as the engine sets it
// (2 × max_concurrent × max_instances, Azure's 500 ms wait), or nil.
func benchHold(autoscale bool, conns int) *router.Hold {
	if !autoscale {
		return nil
	}
	return &router.Hold{MaxWait: 500 * time.Millisecond, MaxHeld: 2 * int64(conns), Kick: func() {}}
}

// waitScoring waits until url answers a scoring request, sent through client, with the
// model server's answer (nginx needs a moment to start), or fails at once when exited, if
// not nil, reports that the server has exited.
func waitScoring(ctx context.Context, client *http.Client, url, key string, exited func() error) error {
	deadline := time.Now().Add(15 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		if exited != nil {
			if err := exited(); err != nil {
				return err
			}
		}
		if last = scoreOnce(ctx, client, url, key); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("no scoring answer within 15s: %w", last)
}

func scoreOnce(ctx context.Context, client *http.Client, url, key string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(scoringPayload))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK || string(body) != scoringAnswer {
		return fmt.Errorf("POST %s: %s %q", url, res.Status, body)
	}
	return nil
}

// helperProc is this binary run in one of its helper modes (-serve-backend, -serve-router)
// in a process of its own: it takes commands on stdin, answers on stdout, and exits when
// stdin closes.
type helperProc struct {
	name  string // for errors: "the model server", "the router"
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	addr  string
	done  chan struct{}
	err   error
}

// startHelper starts this binary with flag and the extra environment, writes config (a
// line, unless nil) to it, and reads the address it listens on.
func startHelper(name, flag string, env []string, config []byte) (*helperProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	p := &helperProc{name: name, cmd: exec.Command(self, flag), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stderr = os.Stderr
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	p.out = bufio.NewReader(stdout)
	if config != nil {
		if _, err := p.stdin.Write(append(config, '\n')); err != nil {
			_ = p.stop()
			return nil, fmt.Errorf("configuring %s: %w", name, err)
		}
	}
	addr, rerr := p.out.ReadString('\n')
	if rerr != nil {
		_ = p.stop()
		return nil, fmt.Errorf("%s printed no address: %w", name, rerr)
	}
	p.addr = strings.TrimSpace(addr)
	return p, nil
}

// pids lists the helper's process, whose CPU time its row counts.
func (p *helperProc) pids() []int { return []int{p.cmd.Process.Pid} }

// startBackend starts the model server and reads the address it listens on.
func startBackend() (*helperProc, error) {
	return startHelper("the model server", "-serve-backend", nil, nil)
}

// stop closes the helper's stdin, which makes it exit, and waits; it is killed if it
// takes longer than 10s.
func (p *helperProc) stop() error {
	_ = p.stdin.Close()
	select {
	case <-p.done:
		return p.err
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not exit within 10s and was killed", p.name)
	}
}

// serveBackend is -serve-backend: a model server that answers every request with
// scoringAnswer over keep-alive HTTP/1.1 on a loopback port. It prints the address on
// stdout and exits when stdin closes, so it never outlives the benchmark.
func serveBackend(stdin io.Reader, stdout io.Writer) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, scoringAnswer)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		_ = srv.Close()
	}()
	if _, err := fmt.Fprintln(stdout, ln.Addr().String()); err != nil {
		_ = ln.Close()
		return err
	}
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// lookTool finds a benchmark tool; Debian installs nginx in /usr/sbin, which a non-root
// PATH often lacks.
func lookTool(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	if !strings.Contains(name, "/") {
		for _, dir := range []string{"/usr/sbin", "/sbin"} {
			if p, err := exec.LookPath(filepath.Join(dir, name)); err == nil {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("%s not found: make bench installs nginx and wrk (scripts/bench-deps.sh), or run apt-get install nginx wrk", name)
}

func randomKey() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// routerConfig is what the router process (-serve-router) serves: the first line of its
// stdin, in JSON.
type routerConfig struct {
	Backend string // the model server's host:port
	Key     string
	Conns   int    // the deployment's concurrency limit: wrk's connection count
	Profile string // where "profile on"/"profile off" write a CPU profile
	// Autoscale serves the deployment as an autoscaled one (its router.Hold set).
	Autoscale bool `json:",omitempty"`
	// TLSCert and TLSKey, when set, serve the router over TLS as the engine does with
	// --tls (serveRouterTLS).
	TLSCert string `json:",omitempty"`
	TLSKey  string `json:",omitempty"`
}

// startRouterProc starts the router process with GOMAXPROCS set to workers and reads the
// address it listens on.
func startRouterProc(cfg routerConfig, workers int) (*helperProc, error) {
	line, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	return startHelper("the router", "-serve-router", []string{"GOMAXPROCS=" + strconv.Itoa(workers)}, line)
}

// profile starts (on) or stops and writes (off) the router's CPU profile.
func (p *helperProc) profile(on bool) error {
	cmd := "profile off\n"
	if on {
		cmd = "profile on\n"
	}
	if _, err := io.WriteString(p.stdin, cmd); err != nil {
		return fmt.Errorf("router: %s: %w", strings.TrimSpace(cmd), err)
	}
	answer, err := p.out.ReadString('\n')
	if err != nil {
		return fmt.Errorf("router: %s: %w", strings.TrimSpace(cmd), err)
	}
	if answer = strings.TrimSpace(answer); answer != "ok" {
		return fmt.Errorf("router: %s: %s", strings.TrimSpace(cmd), answer)
	}
	return nil
}

// serveRouterProcess is -serve-router: it reads a routerConfig line from stdin, serves the
// router (serveRouter), prints its address, then obeys "profile on" and "profile off"
// lines (answering "ok" or the error) until stdin closes.
func serveRouterProcess(stdin io.Reader, stdout io.Writer) (err error) {
	in := bufio.NewReader(stdin)
	line, err := in.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("reading the configuration: %w", err)
	}
	var cfg routerConfig
	if err := json.Unmarshal(line, &cfg); err != nil {
		return fmt.Errorf("reading the configuration: %w", err)
	}
	daemon.SetGCPace() // the engine's pace (mlcompute serve)
	addr, stop, err := serveRouterWith(cfg)
	if err != nil {
		return err
	}
	defer stop()
	if _, err := fmt.Fprintln(stdout, addr); err != nil {
		return err
	}
	var profile *os.File
	defer func() {
		if profile != nil {
			pprof.StopCPUProfile()
			if cerr := profile.Close(); err == nil {
				err = cerr
			}
		}
	}()
	for {
		cmd, rerr := in.ReadString('\n')
		if rerr != nil {
			return nil // stdin closed: the benchmark is over
		}
		var answer error
		switch strings.TrimSpace(cmd) {
		case "profile on":
			if profile != nil {
				answer = errors.New("already profiling")
				break
			}
			if profile, answer = os.Create(cfg.Profile); answer != nil {
				break
			}
			if answer = pprof.StartCPUProfile(profile); answer != nil {
				_ = profile.Close()
				profile = nil
			}
		case "profile off":
			if profile == nil {
				answer = errors.New("not profiling")
				break
			}
			pprof.StopCPUProfile()
			answer = profile.Close()
			profile = nil
		default:
			answer = fmt.Errorf("unknown command %q", strings.TrimSpace(cmd))
		}
		reply := "ok"
		if answer != nil {
			reply = "error: " + answer.Error()
		}
		if _, err := fmt.Fprintln(stdout, reply); err != nil {
			return err
		}
	}
}

// clockTicks is USER_HZ, the unit of the CPU times in /proc/<pid>/stat: 100 on every
// Linux architecture Go runs on (the kernel's value exposed to user space).
const clockTicks = 100

// procCPU returns the CPU time (user and system, every thread) the processes have used
// so far.
func procCPU(pids []int) (time.Duration, error) {
	var ticks uint64
	for _, pid := range pids {
		raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return 0, err
		}
		// Fields after the command name, which is in parentheses and may hold anything:
		// utime and stime are fields 14 and 15 of stat, 12 and 13 after the name.
		i := strings.LastIndexByte(string(raw), ')')
		f := strings.Fields(string(raw[i+1:]))
		if i < 0 || len(f) < 13 {
			return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
		}
		for _, v := range f[11:13] {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
			}
			ticks += n
		}
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// childPids lists the processes whose parent is pid (nginx's workers of its master).
func childPids(pid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(raw), ')')
		f := strings.Fields(string(raw[i+1:]))
		if i >= 0 && len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}

// printCPU prints each target's median CPU time per request: the proxy's own, the model
// server's and wrk's, and the proxy's cost against nginx's.
func printCPU(targets []scoringTarget, results [][]wrkResult) {
	perRequest := func(d time.Duration, n int64) float64 {
		if n == 0 {
			return 0
		}
		return float64(d.Microseconds()) / float64(n)
	}
	proxy := make([]float64, len(targets))
	fmt.Println()
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 3, ' ', 0)
	fmt.Fprintf(w, "CPU time per request (us)\tproxy\tmodel server\twrk\tall three\truns proxy (us)\tproxy vs %s\n", targets[nginxRow].Name)
	rows := make([][4]float64, len(targets))
	runs := make([][]string, len(targets))
	for i, rs := range results {
		var p, b, k, all []float64
		for _, res := range rs {
			p = append(p, perRequest(res.ProxyCPU, res.Requests))
			b = append(b, perRequest(res.BackendCPU, res.Requests))
			k = append(k, perRequest(res.WrkCPU, res.Requests))
			all = append(all, perRequest(res.ProxyCPU+res.BackendCPU+res.WrkCPU, res.Requests))
			runs[i] = append(runs[i], fmt.Sprintf("%.1f", p[len(p)-1]))
		}
		rows[i] = [4]float64{medianFloat(p), medianFloat(b), medianFloat(k), medianFloat(all)}
		proxy[i] = rows[i][0]
	}
	for i, t := range targets {
		vs := ""
		if i >= routerRow && proxy[nginxRow] > 0 {
			vs = fmt.Sprintf("%.2fx", proxy[i]/proxy[nginxRow])
		}
		runsProxy := strings.Join(runs[i], " ")
		if i == directRow {
			runsProxy = ""
		}
		fmt.Fprintf(w, "%s\t%.1f\t%.1f\t%.1f\t%.1f\t%s\t%s\n", t.Name, rows[i][0], rows[i][1], rows[i][2], rows[i][3], runsProxy, vs)
	}
	w.Flush()
}
