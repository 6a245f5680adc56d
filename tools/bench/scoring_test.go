//go:build unix

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startTestBackend runs serveBackend as the benchmark's child would, over pipes, and
// returns its address and a function that closes its stdin and returns its result.
func startTestBackend(t *testing.T) (addr string, stop func() error) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	result := make(chan error, 1)
	go func() { result <- serveBackend(inR, outW) }()
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	var once bool
	stop = func() error {
		if once {
			return nil
		}
		once = true
		_ = inW.Close()
		select {
		case err := <-result:
			return err
		case <-time.After(time.Minute):
			t.Fatal("the model server did not exit after its stdin closed")
			return nil
		}
	}
	t.Cleanup(func() { _ = stop() })
	return strings.TrimSpace(line), stop
}

// The model server answers scoring requests and exits cleanly when its stdin closes, so
// it cannot outlive a benchmark that dies.
func TestServeBackend_AnswersAndExitsWithStdin(t *testing.T) {
	addr, stop := startTestBackend(t)
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	if err := scoreOnce(context.Background(), client, "http://"+addr+"/score", "any"); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatalf("serveBackend returned %v after stdin closed, want nil", err)
	}
	if err := scoreOnce(context.Background(), client, "http://"+addr+"/score", "any"); err == nil {
		t.Fatal("the model server still answers after stdin closed")
	}
}

// The router is configured as the nginx config is: the endpoint's path, key auth, and the
// model server behind it.
func TestServeRouter_ForwardsWithKeyOnly(t *testing.T) {
	backend, _ := startTestBackend(t)
	front, stop, err := serveRouter(backend, "k3y", 32)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	url := "http://" + front + "/" + scoringEndpoint + "/score"
	if err := scoreOnce(context.Background(), client, url, "k3y"); err != nil {
		t.Fatal(err)
	}
	err = scoreOnce(context.Background(), client, url, "wrong")
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("a wrong key got %v, want 401", err)
	}
}

// Over TLS the router serves the run's certificate, which a client pinning the run's CA
// accepts; plain HTTP on its port gets a 400 and no scoring answer.
func TestServeRouter_TLSServesTheRunsCertificate(t *testing.T) {
	backend, _ := startTestBackend(t)
	cert, err := makeBenchCert(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	front, stop, err := serveRouterWith(routerConfig{Backend: backend, Key: "k3y", Conns: 4, TLSCert: cert.CertFile, TLSKey: cert.KeyFile})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	client, err := cert.client()
	if err != nil {
		t.Fatal(err)
	}
	defer client.CloseIdleConnections()
	path := "/" + scoringEndpoint + "/score"
	if err := scoreOnce(context.Background(), client, "https://"+front+path, "k3y"); err != nil {
		t.Fatal(err)
	}
	err = scoreOnce(context.Background(), client, "https://"+front+path, "wrong")
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("a wrong key over TLS got %v, want 401", err)
	}
	plain := &http.Client{Timeout: 10 * time.Second}
	if err := scoreOnce(context.Background(), plain, "http://"+front+path, "k3y"); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("plain HTTP to the TLS port got %v, want net/http's 400", err)
	}
	other, err := makeBenchCert(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	wrongCA, err := other.client()
	if err != nil {
		t.Fatal(err)
	}
	if err := scoreOnce(context.Background(), wrongCA, "https://"+front+path, "k3y"); err == nil || !strings.Contains(err.Error(), "not trusted") {
		t.Fatalf("a client pinning another CA got %v, want the engine's untrusted-certificate error", err)
	}
}

// nginx's TLS pass listens with ssl on the run's certificate and key, TLS 1.2 or later;
// the plain pass has no ssl at all.
func TestNginxConfig_TLSOnlyInTheTLSPass(t *testing.T) {
	base := nginxSettings{Dir: "/scratch", Workers: 2, Listen: "127.0.0.1:8080", Backend: "127.0.0.1:9", Keepalive: 32, Path: "/bench/score", Key: "k", Deployment: "blue"}
	var plain, secure strings.Builder
	if err := nginxConfig.Execute(&plain, base); err != nil {
		t.Fatal(err)
	}
	withTLS := base
	withTLS.TLSCert, withTLS.TLSKey = "/scratch/server.pem", "/scratch/server-key.pem"
	if err := nginxConfig.Execute(&secure, withTLS); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plain.String(), "ssl") {
		t.Errorf("the plain config mentions ssl:\n%s", plain.String())
	}
	for _, want := range []string{
		"listen 127.0.0.1:8080 reuseport ssl;",
		"ssl_certificate /scratch/server.pem;",
		"ssl_certificate_key /scratch/server-key.pem;",
		"ssl_protocols TLSv1.2 TLSv1.3;",
	} {
		if !strings.Contains(secure.String(), want) {
			t.Errorf("the TLS config lacks %q:\n%s", want, secure.String())
		}
	}
}

func TestTLSProfilePath(t *testing.T) {
	for in, want := range map[string]string{"": "", "router.pprof": "router-tls.pprof", "/tmp/p": "/tmp/p-tls"} {
		if got := tlsProfilePath(in); got != want {
			t.Errorf("tlsProfilePath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMedianFloat(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		if got := medianFloat(tc.in); got != tc.want {
			t.Errorf("medianFloat(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// The router process is configured over stdin, serves the endpoint as serveRouter does,
// writes a CPU profile between "profile on" and "profile off", and exits when stdin
// closes.
func TestServeRouterProcess_ConfiguredOverStdinProfilesAndExits(t *testing.T) {
	backend, _ := startTestBackend(t)
	profile := filepath.Join(t.TempDir(), "router.prof")
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	result := make(chan error, 1)
	go func() { result <- serveRouterProcess(inR, outW) }()
	out := bufio.NewReader(outR)
	cfg, _ := json.Marshal(routerConfig{Backend: backend, Key: "k3y", Conns: 4, Profile: profile})
	if _, err := inW.Write(append(cfg, '\n')); err != nil {
		t.Fatal(err)
	}
	addr, err := out.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	command := func(cmd, want string) {
		t.Helper()
		if _, err := io.WriteString(inW, cmd+"\n"); err != nil {
			t.Fatal(err)
		}
		got, err := out.ReadString('\n')
		if err != nil || !strings.HasPrefix(got, want) {
			t.Fatalf("%s: got %q, %v; want %q", cmd, got, err, want)
		}
	}
	command("profile off", "error: not profiling")
	command("profile on", "ok")
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	if err := scoreOnce(context.Background(), client, "http://"+strings.TrimSpace(addr)+"/"+scoringEndpoint+"/score", "k3y"); err != nil {
		t.Fatal(err)
	}
	command("profile on", "error: already profiling")
	command("profile off", "ok")
	if st, err := os.Stat(profile); err != nil || st.Size() == 0 {
		t.Fatalf("no profile written: %v", err)
	}
	_ = inW.Close()
	select {
	case err := <-result:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the router process did not exit after its stdin closed")
	}
}

// procCPU reads the CPU time of processes from /proc: this process's grows as it works.
func TestProcCPU_GrowsWithWork(t *testing.T) {
	self := []int{os.Getpid()}
	before, err := procCPU(self)
	if err != nil {
		t.Fatal(err)
	}
	var after time.Duration
	for spin := 0; after <= before; spin++ {
		sink := 0
		for i := 0; i < 10_000_000; i++ {
			sink += i * spin
		}
		_ = sink
		if after, err = procCPU(self); err != nil {
			t.Fatal(err)
		}
		if spin > 1000 {
			t.Fatalf("CPU time stayed at %s after a lot of work", before)
		}
	}
	if _, err := procCPU([]int{-1}); err == nil {
		t.Fatal("no error for a process that cannot exist")
	}
}
