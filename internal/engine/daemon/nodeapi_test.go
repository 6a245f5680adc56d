package daemon

import (
	"os"
	"path/filepath"
	"testing"
)

// TestNodeAPIEndpointIsWhatTheNodeCanReach: local nodes reach the unix socket and
// loopback; nodes elsewhere reach only a listener off loopback.
func TestNodeAPIEndpointIsWhatTheNodeCanReach(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		listen, driver string
		tls            TLSOptions
		want           string
		ca             bool
	}{
		{"", "local", TLSOptions{}, "unix://DATA/engine.sock", false},
		{"", "slurm", TLSOptions{}, "", false},
		{"tcp://127.0.0.1:8443", "local", TLSOptions{}, "http://127.0.0.1:8443", false},
		{"tcp://127.0.0.1:8443", "local", TLSOptions{On: true}, "https://127.0.0.1:8443", true},
		{"tcp://127.0.0.1:8443", "kubernetes", TLSOptions{}, "", false},
		{"tcp://0.0.0.0:8443", "local", TLSOptions{On: true}, "https://127.0.0.1:8443", true},
		{"tcp://0.0.0.0:8443", "slurm", TLSOptions{}, "https://" + host + ":8443", true},
		{"tcp://10.1.2.3:8443", "slurm", TLSOptions{InsecureHTTP: true}, "http://10.1.2.3:8443", false},
		{"tcp://10.1.2.3:8443", "slurm", TLSOptions{CertFile: "c.pem", KeyFile: "k.pem"}, "https://10.1.2.3:8443", false},
		{"tcp://127.0.0.1:0", "local", TLSOptions{}, "", false},
	}
	for _, tt := range tests {
		dir := t.TempDir()
		got, err := nodeAPI(Options{DataDir: dir, Listen: tt.listen, TLS: tt.tls}, tt.driver)
		if err != nil {
			t.Fatal(err)
		}
		want := tt.want
		if len(want) > 7 && want[:7] == "unix://" {
			want = "unix://" + filepath.Join(dir, SocketFile)
		}
		if got.Endpoint != want {
			t.Errorf("listen %q on %s with %+v: endpoint %q, want %q", tt.listen, tt.driver, tt.tls, got.Endpoint, want)
		}
		if (got.CACertFile != "") != tt.ca {
			t.Errorf("listen %q on %s with %+v: CA file %q, want one: %v", tt.listen, tt.driver, tt.tls, got.CACertFile, tt.ca)
		}
		if len(got.Key) == 0 {
			t.Errorf("listen %q: no activity key", tt.listen)
		}
	}
}

// TestActivityKeyIsKept: the key is made once, 0600, and read back at the next start, so
// tokens survive a restart.
func TestActivityKeyIsKept(t *testing.T) {
	dir := t.TempDir()
	first, err := nodeAPI(Options{DataDir: dir}, "local")
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, ActivityKeyFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("activity key file: %v, mode %v; want 0600", err, st.Mode().Perm())
	}
	again, err := nodeAPI(Options{DataDir: dir}, "local")
	if err != nil || string(again.Key) != string(first.Key) {
		t.Fatalf("second start: key changed (%v)", err)
	}
}
