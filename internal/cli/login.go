package cli

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/daemon"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/tlsconfig"
)

// caCertEnv holds the CA an https endpoint's certificate must chain to: its PEM, or the
// path of a PEM file.
const caCertEnv = "MLCOMPUTE_CA_CERT"

// caCertFromEnv returns the PEM MLCOMPUTE_CA_CERT names (nil when unset).
func caCertFromEnv() ([]byte, error) {
	v := strings.TrimSpace(os.Getenv(caCertEnv))
	if v == "" {
		return nil, nil
	}
	if strings.Contains(v, "-----BEGIN") {
		return []byte(v), nil
	}
	raw, err := os.ReadFile(v)
	if err != nil {
		return nil, fmt.Errorf("%s names neither a PEM certificate nor a readable file: %w", caCertEnv, err)
	}
	return raw, nil
}

// tlsOption is the client option that pins the CA of an https endpoint (none for others).
func (g *globals) tlsOption() ([]client.Option, error) {
	if !strings.HasPrefix(g.endpoint, "https://") {
		return nil, nil
	}
	ca, err := caCertFromEnv()
	if err != nil {
		return nil, err
	}
	cfg, err := tlsconfig.Client(daemon.EndpointCA(g.endpoint, ca, g.tokenDataDir()))
	if err != nil {
		return nil, err
	}
	return []client.Option{client.WithTLS(cfg)}, nil
}

// scoringCA is the CA an https scoring_uri's certificate must chain to: the engine's
// scoring router serves the same certificate as its API, so it is the API endpoint's CA
// (MLCOMPUTE_CA_CERT, the one `mlcompute login` stored, or the data dir's own), and for an
// engine reached over its unix socket, the CA its data dir holds for loopback.
func (g *globals) scoringCA(scoringURI string) ([]byte, error) {
	ca, err := caCertFromEnv()
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(g.endpoint, "https://") {
		return daemon.EndpointCA(g.endpoint, ca, g.tokenDataDir()), nil
	}
	return daemon.EndpointCA(scoringURI, ca, g.tokenDataDir()), nil
}

func newLoginCommand(g *globals) *cobra.Command {
	var endpoint, fingerprint string
	cmd := &cobra.Command{
		Use:   "login",
		Short: "Trust an engine's CA: show its fingerprint and store it once confirmed",
		Long: "Connect to an https engine, show the SHA-256 fingerprint of the CA its certificate " +
			"chains to (compare it with the one 'mlcompute serve' printed), and once you confirm it (or " +
			"it equals --ca-fingerprint) store the CA in <data-dir>/known_engines/, where the CLI finds it " +
			"for this endpoint from then on.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if endpoint == "" {
				endpoint = g.endpoint
			}
			return runLogin(cmd.Context(), g, endpoint, fingerprint, cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&endpoint, "endpoint", "", "the engine: https://host:port (default: --endpoint of the command line, or MLCOMPUTE_ENDPOINT)")
	cmd.Flags().StringVar(&fingerprint, "ca-fingerprint", "", "the CA's SHA-256 fingerprint as serve printed it: store the CA without asking when it matches, fail when not")
	return cmd
}

func runLogin(ctx context.Context, g *globals, endpoint, want string, in io.Reader, out io.Writer) error {
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("--endpoint %q: want https://host:port (login pins the CA of a TLS engine)", endpoint)
	}
	if want != "" {
		if want, err = tlsconfig.NormalizeFingerprint(want); err != nil {
			return fmt.Errorf("--ca-fingerprint: %w", err)
		}
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "443")
	}
	// The chain is read without trusting it yet: that is what the user is asked to decide.
	d := &tls.Dialer{Config: &tls.Config{MinVersion: tlsconfig.MinVersion, InsecureSkipVerify: true}} //nolint:gosec // shown to the user, stored only once confirmed
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	conn, err := d.DialContext(dctx, "tcp", host)
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", endpoint, err)
	}
	chain := conn.(*tls.Conn).ConnectionState().PeerCertificates
	conn.Close()
	ca := chain[len(chain)-1]
	seen := tlsconfig.Fingerprint(ca)
	fmt.Fprintf(out, "The engine at %s presents a CA (%s) with SHA-256 fingerprint\n  %s\n", endpoint, ca.Subject.CommonName, seen)
	switch {
	case want != "" && want != seen:
		return fmt.Errorf("the CA's fingerprint is %s, not the %s given with --ca-fingerprint: nothing stored", seen, want)
	case want == "":
		fmt.Fprint(out, "Trust it for this endpoint? [y/N] ")
		line, _ := bufio.NewReader(in).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
			return errors.New("not confirmed: nothing stored")
		}
	}
	caPEM := tlsconfig.PEM(ca.Raw)
	// The engine's certificate must verify against the CA for its name before it is kept.
	cfg, err := tlsconfig.Client(caPEM)
	if err != nil {
		return err
	}
	vconn, err := (&tls.Dialer{Config: cfg}).DialContext(dctx, "tcp", host)
	if err != nil {
		return fmt.Errorf("the engine's certificate does not verify against that CA for %s: %w", u.Hostname(), err)
	}
	vconn.Close()
	dir, err := g.resolvedDataDir()
	if err != nil {
		return err
	}
	path := daemon.KnownCAFile(dir, endpoint)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("storing the CA: %w", err)
	}
	if err := os.WriteFile(path, caPEM, 0o600); err != nil {
		return fmt.Errorf("storing the CA: %w", err)
	}
	fmt.Fprintf(out, "Stored in %s.\n", path)
	return nil
}
