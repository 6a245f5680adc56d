package serving

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestHTTPProbePassesOn2xxAnd3xxOnly(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Connection") != "close" {
			t.Errorf("probe of %s asked to keep its connection", r.URL.Path)
		}
		switch r.URL.Path {
		case "/ok":
			w.WriteHeader(http.StatusNoContent)
		case "/moved":
			http.Redirect(w, r, "/broken", http.StatusFound) // passes as it is, not followed
		case "/broken":
			w.WriteHeader(http.StatusInternalServerError)
		case "/slow":
			<-block
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	defer close(block) // before Close, which waits for the slow handler
	ctx := context.Background()
	for path, want := range map[string]bool{"/ok": true, "/moved": true, "/broken": false, "/missing": false} {
		if got := HTTPProbe(ctx, srv.URL+path, 5*time.Second); got != want {
			t.Errorf("probe of %s: %v; want %v", path, got, want)
		}
	}
	if HTTPProbe(ctx, srv.URL+"/slow", 50*time.Millisecond) {
		t.Error("a probe that got no answer within its timeout passed")
	}
	if HTTPProbe(ctx, "http://127.0.0.1:1/", time.Second) {
		t.Error("a probe of a port nothing listens on passed")
	}
}
