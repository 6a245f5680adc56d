package router

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router/internal/testbackend"

	"github.com/hashicorp/go-hclog"
)

const benchPayload = `{"input_data":{"columns":["a","b","c"],"data":[[1,2,3],[4,5,6]]}}`

// benchClient is an HTTP/1.1 client that keeps a connection per parallel worker.
func benchClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}}
}

func benchBackend(b *testing.B) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"predictions":[0.1,0.9]}`)
	}))
	b.Cleanup(s.Close)
	return s
}

// runParallel posts benchPayload to url from parallel workers and fails on any non-200.
func runParallel(b *testing.B, url string, header http.Header) {
	client := benchClient()
	b.Cleanup(client.CloseIdleConnections)
	var failures atomic.Int64
	b.SetParallelism(4) // 4 x GOMAXPROCS concurrent requests
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(benchPayload))
			req.Header = header.Clone()
			res, err := client.Do(req)
			if err != nil {
				failures.Add(1)
				continue
			}
			_, _ = io.Copy(io.Discard, res.Body)
			_ = res.Body.Close()
			if res.StatusCode != http.StatusOK {
				failures.Add(1)
			}
		}
	})
	b.StopTimer()
	if n := failures.Load(); n > 0 {
		b.Fatalf("%d requests failed", n)
	}
}

// BenchmarkRouterProxy measures a scoring request through the router (auth, traffic
// draw, instance choice, proxy) to one instance, both over loopback HTTP/1.1.
func BenchmarkRouterProxy(b *testing.B) {
	backend := benchBackend(b)
	r := New(Options{Logger: hclog.NewNullLogger()})
	b.Cleanup(r.Close)
	u := backendOf(&testbackend.Backend{Server: backend}, "b-0")
	r.SetEndpoint(Endpoint{
		Name:     "bench",
		AuthMode: AuthModeKey,
		Keys:     [2]string{testPrimary, testSecondary},
		Traffic:  map[string]int{"blue": 100},
		Deployments: map[string]*Deployment{"blue": {
			Name: "blue", Backends: []Backend{u}, MaxConcurrentPerInstance: 1 << 20,
		}},
	})
	front := newFront(b, r)
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Authorization", "Bearer "+testPrimary)
	runParallel(b, front.URL+ScoringPath("bench"), h)
}

// BenchmarkDirectBaseline is the same load sent straight to the instance: the baseline
// BenchmarkRouterProxy is compared with in the same run.
func BenchmarkDirectBaseline(b *testing.B) {
	backend := benchBackend(b)
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	runParallel(b, backend.URL+"/score", h)
}
