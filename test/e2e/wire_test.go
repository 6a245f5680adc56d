//go:build unix

package e2e

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/tlsconfig"
)

// TestE2E_TeamEngineOverTheWire is the shared engine as a team uses it: `mlcompute serve`
// listens on an address of this machine that a second network namespace (a teammate's
// machine) reaches over a veth link, with TLS on the API and the scoring router. From that
// namespace, with a contributor's token and the engine's CA, terraform applies a cluster
// and an online endpoint, the CLI submits a job and invokes the endpoint. tcpdump records
// the link the whole time: neither the token, nor the endpoint's key, nor an HTTP request
// line is in clear in what it captured.
func TestE2E_TeamEngineOverTheWire(t *testing.T) {
	t.Parallel()
	u := newUser(t)
	for _, tool := range []string{"ip", "tcpdump"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: make test installs it (scripts/test-deps.sh)", tool)
		}
	}
	link := newVethNamespace(t)

	apiAddr, scoringAddr := freeAddr(t, link.hostIP), freeAddr(t, link.hostIP)
	serve := exec.Command(filepath.Join(binDir, "mlcompute"), "serve",
		"--listen", "tcp://"+apiAddr, "--scoring-listen", scoringAddr)
	serve.Env = u.env
	var serveLog bytes.Buffer
	serve.Stdout, serve.Stderr = &serveLog, &serveLog
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = serve.Process.Kill(); _ = serve.Wait() })
	endpoint := "https://" + apiAddr

	// On this machine, the operator: the token serve wrote (api.token), the CA pinned.
	cli := filepath.Join(binDir, "mlcompute")
	caPin := "MLCOMPUTE_CA_CERT=" + filepath.Join(u.home, "ca.pem")
	var operatorToken []byte
	u.waitFor("serve writes its token", 30*time.Second, func() bool {
		operatorToken, _ = os.ReadFile(filepath.Join(u.home, "api.token"))
		return len(bytes.TrimSpace(operatorToken)) > 0
	})
	operator := func(args ...string) (string, int) {
		t.Helper()
		return u.runEnv([]string{"MLCOMPUTE_ENDPOINT=" + endpoint, caPin,
			"MLCOMPUTE_TOKEN=" + string(bytes.TrimSpace(operatorToken))}, cli, args...)
	}
	var status string
	if !waitUntil(30*time.Second, func() bool { var code int; status, code = operator("status"); return code == 0 }) {
		t.Fatalf("serve does not answer over TLS: %s\nserve's log:\n%s", status, serveLog.String())
	}
	out, code := operator("token", "create", "--name", "teammate", "--role", api.RoleContributor, "--workspace", "e2e-team", "-o", "json")
	if code != 0 {
		t.Fatalf("token create: exit %d: %s", code, out)
	}
	var created api.TokenCreated
	decodeJSON(t, out, &created)
	token := created.Secret

	capture := startCapture(t, link.hostVeth)

	// In the teammate's namespace: the token and the CA, nothing else of the engine's.
	teammate := func(name string, args ...string) (string, int) {
		t.Helper()
		ns := append([]string{"netns", "exec", link.namespace, name}, args...)
		return u.runEnv([]string{"MLCOMPUTE_ENDPOINT=" + endpoint, "MLCOMPUTE_TOKEN=" + token, caPin}, "ip", ns...)
	}
	u.writeConfig(strings.Replace(clusterConfig, `provider "mlcompute" {}`, fmt.Sprintf("provider \"mlcompute\" {\n  endpoint = %q\n}", endpoint), 1) + fmt.Sprintf(`
resource "mlcompute_online_endpoint" "wire" {
  name         = "wire"
  workspace_id = mlcompute_workspace.ws.id
  deployments = {
    blue = {
      instance_type   = "Standard_DS2_v2"
      command         = [%q]
      readiness_probe = { path = "/health", initial_delay = "PT0S", period = "PT1S" }
    }
  }
  traffic = { blue = 100 }
}
`, filepath.Join(binDir, "scorer")))
	if out, code := teammate(terraform, "apply", "-auto-approve", "-no-color"); code != 0 {
		t.Fatalf("terraform apply from the namespace: exit %d:\n%s", code, out)
	}
	id, code := teammate(cli, "job", "submit", "--workspace", "e2e-team", "--compute", "cpu", "--stream", "--", "echo", "trained")
	if code != 0 || !strings.Contains(id, "trained") {
		t.Fatalf("job submit --stream from the namespace: exit %d: %s", code, id)
	}
	answer, code := teammate(cli, "endpoint", "invoke", "--workspace", "e2e-team", "wire", "--data", `{"rows": [[1, 2]]}`)
	if code != 0 || !strings.Contains(answer, `"deployment"`) {
		t.Fatalf("endpoint invoke from the namespace: exit %d: %s", code, answer)
	}
	caPEM, err := os.ReadFile(filepath.Join(u.home, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg, err := tlsconfig.Client(caPEM)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(endpoint, string(bytes.TrimSpace(operatorToken)), client.WithTLS(tlsCfg))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := c.GetEndpointKeys(t.Context(), "e2e-team", "wire")
	if err != nil {
		t.Fatal(err)
	}
	ep, err := c.GetEndpoint(t.Context(), "e2e-team", "wire")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ep.ScoringURI, "https://"+scoringAddr) {
		t.Fatalf("scoring_uri %s; want https:// on %s", ep.ScoringURI, scoringAddr)
	}

	wire := capture.stop()
	t.Logf("tcpdump captured %d bytes", len(wire))
	// The capture saw the traffic: the apply, the job's stream and the invocation are far
	// more than this many bytes; and TLS records (content type 23, version 3.3) are in it.
	if len(wire) < 20_000 || !bytes.Contains(wire, []byte{0x17, 0x03, 0x03}) {
		t.Fatalf("tcpdump captured %d bytes without TLS application data records; the capture is broken", len(wire))
	}
	for what, secret := range map[string]string{
		"the contributor's token": token, "the endpoint's primary key": keys.PrimaryKey,
		"an Authorization header": "Authorization", "an HTTP request line": "HTTP/1.1",
		"a path of the API": "/v1/workspaces",
	} {
		if bytes.Contains(wire, []byte(secret)) {
			t.Errorf("%s is in clear on the wire", what)
		}
	}
	if out, code := teammate(terraform, "destroy", "-auto-approve", "-no-color"); code != 0 {
		t.Fatalf("terraform destroy from the namespace: exit %d:\n%s", code, out)
	}
}

// runEnv runs a command in the working dir with the user's environment and extra, and
// returns its output and exit code.
func (u *user) runEnv(extra []string, name string, args ...string) (string, int) {
	u.t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = u.workDir
	cmd.Env = append(append([]string{}, u.env...), extra...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if exitErr, ok := err.(*exec.ExitError); ok {
		return out.String(), exitErr.ExitCode()
	} else if err != nil {
		u.t.Fatalf("running %s: %v", name, err)
	}
	return out.String(), 0
}

// vethNamespace is a network namespace linked to this machine by a veth pair.
type vethNamespace struct {
	namespace, hostVeth string
	hostIP, nsIP        string
}

// newVethNamespace makes a namespace with a /30 link to this machine, removed when t ends.
func newVethNamespace(t *testing.T) vethNamespace {
	t.Helper()
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	tag := hex.EncodeToString(b)
	// A /30 of 10.254.0.0/16 drawn from the tag: a collision with another test's link is
	// refused by ip (the address is taken) and fails the test loudly.
	net30 := fmt.Sprintf("10.254.%d.", b[0])
	hostIP, nsIP := net30+fmt.Sprint(b[1]&0xfc+1), net30+fmt.Sprint(b[1]&0xfc+2)
	l := vethNamespace{namespace: "mlcwire-" + tag, hostVeth: "mwh" + tag, hostIP: hostIP, nsIP: nsIP}
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s (this test needs root, as the SSH driver's tests do)", strings.Join(args, " "), err, out)
		}
	}
	ip("netns", "add", l.namespace)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", l.namespace).Run() })
	ip("link", "add", l.hostVeth, "type", "veth", "peer", "name", "mwc"+tag)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", l.hostVeth).Run() })
	ip("link", "set", "mwc"+tag, "netns", l.namespace)
	ip("addr", "add", hostIP+"/30", "dev", l.hostVeth)
	ip("link", "set", l.hostVeth, "up")
	ip("-n", l.namespace, "addr", "add", nsIP+"/30", "dev", "mwc"+tag)
	ip("-n", l.namespace, "link", "set", "mwc"+tag, "up")
	ip("-n", l.namespace, "link", "set", "lo", "up")
	return l
}

// freeAddr returns host:port with a port free on host a moment ago.
func freeAddr(t *testing.T, host string) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// capture is a running tcpdump writing every packet of an interface to a file.
type capture struct {
	t    *testing.T
	cmd  *exec.Cmd
	file string
}

// startCapture starts tcpdump on dev and returns once it captures. Immediate mode: without
// it libpcap hands packets over in blocks of its ring (TPACKET_V3), and the block still
// filling when tcpdump is stopped is lost; a test over in seconds then lost most of its
// traffic (6 KB of 47 KB here), and could pass without looking at the packets that matter.
func startCapture(t *testing.T, dev string) *capture {
	t.Helper()
	c := &capture{t: t, file: filepath.Join(t.TempDir(), "wire.pcap")}
	c.cmd = exec.Command("tcpdump", "-i", dev, "-n", "--immediate-mode", "-U", "-s", "0", "-w", c.file, "tcp")
	stderr, err := c.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.cmd.Process.Kill(); _ = c.cmd.Wait() })
	lines := bufio.NewScanner(stderr)
	for lines.Scan() {
		if strings.Contains(lines.Text(), "listening on") {
			go func() { // tcpdump's later lines go nowhere
				for lines.Scan() {
				}
			}()
			return c
		}
	}
	t.Fatalf("tcpdump on %s never said it was listening", dev)
	return nil
}

// stop ends the capture and returns the file's bytes.
func (c *capture) stop() []byte {
	c.t.Helper()
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	_ = c.cmd.Wait()
	b, err := os.ReadFile(c.file)
	if err != nil {
		c.t.Fatal(err)
	}
	return b
}
