//go:build unix

package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestMessageLength(t *testing.T) {
	const head = "POST /score HTTP/1.1\r\nHost: x\r\n"
	for _, tc := range []struct {
		name string
		in   string
		want int
	}{
		{"no end of head yet", head, 0},
		{"head without a body", head + "\r\n", len(head) + 2},
		{"whole body", head + "Content-Length: 5\r\n\r\nhello", len(head) + 21 + 5},
		{"body not all there", head + "Content-Length: 5\r\n\r\nhel", 0},
		{"name in lower case", head + "content-length: 2\r\n\r\nhi", len(head) + 21 + 2},
		{"a second message behind", head + "Content-Length: 2\r\n\r\nhi" + head, len(head) + 21 + 2},
	} {
		if got := messageLength([]byte(tc.in)); got != tc.want {
			t.Errorf("%s: messageLength = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// Each floor proxy forwards scoring requests over one kept-alive connection, and exits
// when its stdin closes, so it cannot outlive a benchmark that dies.
func TestServeFloorProcess_ForwardsAndExitsWithStdin(t *testing.T) {
	backend, _ := startTestBackend(t)
	for _, model := range floorModels {
		t.Run(model, func(t *testing.T) {
			inR, inW := io.Pipe()
			outR, outW := io.Pipe()
			result := make(chan error, 1)
			go func() { result <- serveFloorProcess(model, inR, outW) }()
			if _, err := io.WriteString(inW, backend+"\n"); err != nil {
				t.Fatal(err)
			}
			addr, err := bufio.NewReader(outR).ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			url := "http://" + strings.TrimSpace(addr) + "/score"
			client := &http.Client{Timeout: 10 * time.Second}
			for range 3 {
				if err := scoreOnce(context.Background(), client, url, "any"); err != nil {
					t.Fatal(err)
				}
			}
			client.CloseIdleConnections()
			_ = inW.Close()
			select {
			case err := <-result:
				if err != nil {
					t.Fatalf("serveFloorProcess returned %v after stdin closed, want nil", err)
				}
			case <-time.After(time.Minute):
				t.Fatal("the floor proxy did not exit after its stdin closed")
			}
			if err := scoreOnce(context.Background(), client, url, "any"); err == nil {
				t.Fatal("the floor proxy still answers after stdin closed")
			}
		})
	}
}

func TestServeFloorProcess_UnknownModel(t *testing.T) {
	err := serveFloorProcess("uring", strings.NewReader("127.0.0.1:1\n"), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "net, gnet") {
		t.Fatalf("got %v, want an error naming the models", err)
	}
}
