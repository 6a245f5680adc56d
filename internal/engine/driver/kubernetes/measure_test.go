//go:build kubernetes && kubemeasure

package kubernetes

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
)

// TestMeasureWatch200Pods is a measurement, not a check (go test -tags
// 'kubernetes kubemeasure' -run Measure -v): the CPU time and RSS of a process whose driver
// watches 200 node pods for a minute. The pods are held pending by a scheduling gate (the
// test machine's one kubelet runs at most 110 pods), so the watch sees their creation and
// deletion but no kubelet status traffic while idle.
func TestMeasureWatch200Pods(t *testing.T) {
	cfg := clusterConfig(t)
	cfg.schedulingGates = []string{testHold}
	d := newClusterDriver(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const n = 200
	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if _, err := d.Create(ctx, driver.NodeSpec{Key: fmt.Sprintf("w%d", i), Owner: "ws/watch", VCPUs: 1, MemoryGB: 1}); err != nil {
				t.Errorf("Create: %v", err)
			}
		}()
	}
	wg.Wait()
	t.Logf("%d pods created in %s", n, time.Since(start).Round(time.Millisecond))
	cpu0, rss0 := usage(t)
	time.Sleep(time.Minute) // the measurement window
	cpu1, rss1 := usage(t)
	t.Logf("watching %d pods for 1m: CPU %s (%.2f%% of one core), RSS %d MiB before, %d MiB after", n, cpu1-cpu0, float64(cpu1-cpu0)/float64(time.Minute)*100, rss0>>20, rss1>>20)
	start = time.Now()
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := d.Terminate(ctx, fmt.Sprintf("w%d", i)); err != nil {
				t.Errorf("Terminate: %v", err)
			}
		}()
	}
	wg.Wait()
	t.Logf("%d pods released in %s", n, time.Since(start).Round(time.Millisecond))
	if pods := enginePods(t, d); len(pods) != 0 {
		t.Fatalf("%d pods left", len(pods))
	}
}

func usage(t *testing.T) (time.Duration, int64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	var rss int64
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			fmt.Sscanf(strings.TrimPrefix(l, "VmRSS:"), "%d", &rss)
		}
	}
	return cpu, rss << 10
}
