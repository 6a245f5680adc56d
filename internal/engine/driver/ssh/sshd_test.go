//go:build unix

package ssh

import (
	"strings"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/ssh/sshtest"
)

// testServer is a real sshd (see sshtest) with a dedicated user created for the test.
type testServer struct {
	*sshtest.Host
}

func (s *testServer) target() Target {
	return Target{Address: s.Address, Port: s.Port, Username: s.User, PrivateKeyPEM: s.KeyPEM}
}

func startSSHD(t *testing.T) *testServer { return &testServer{sshtest.Start(t)} }

func newClientKey(t *testing.T, options string, authorized *strings.Builder) string {
	return sshtest.NewClientKey(t, options, authorized)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
