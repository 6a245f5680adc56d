// Package tlsconfig holds the engine's TLS: the CA and server certificate `serve` makes
// once in its data dir, the server's tls.Config (TLS 1.2 or later), and the clients'
// tls.Config that pins a CA and, when the engine's certificate does not chain to it, fails
// naming the fingerprint it saw. Only the standard library's crypto is used.
package tlsconfig

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Files serve writes in the data dir when it makes its own certificate (all mode 0600).
const (
	CAFile        = "ca.pem"
	CAKeyFile     = "ca-key.pem"
	ServerFile    = "server.pem"
	ServerKeyFile = "server-key.pem"
)

// MinVersion is the oldest protocol the engine's listeners and clients speak.
const MinVersion = tls.VersionTLS12

// Fingerprint is the SHA-256 of a certificate's DER, as colon-separated upper-case hex
// (the form `openssl x509 -fingerprint -sha256` prints).
func Fingerprint(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.Raw)
	h := strings.ToUpper(hex.EncodeToString(sum[:]))
	parts := make([]string, 0, len(sum))
	for i := 0; i < len(h); i += 2 {
		parts = append(parts, h[i:i+2])
	}
	return strings.Join(parts, ":")
}

// NormalizeFingerprint accepts a fingerprint with or without colons, in any case, and an
// optional "SHA256:" prefix, and returns it in Fingerprint's form.
func NormalizeFingerprint(fp string) (string, error) {
	s := strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(fp), "SHA256:"), "sha256:")
	s = strings.ToLower(strings.ReplaceAll(s, ":", ""))
	raw, err := hex.DecodeString(s)
	if err != nil || len(raw) != sha256.Size {
		return "", fmt.Errorf("%q is no SHA-256 fingerprint: want 64 hex digits, colons allowed", fp)
	}
	h := strings.ToUpper(s)
	parts := make([]string, 0, sha256.Size)
	for i := 0; i < len(h); i += 2 {
		parts = append(parts, h[i:i+2])
	}
	return strings.Join(parts, ":"), nil
}

// ParseCertificates reads every CERTIFICATE block of pemData; an error if there is none.
func ParseCertificates(pemData []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for rest := pemData; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parsing certificate: %w", err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM CERTIFICATE block found")
	}
	return certs, nil
}

// Generated is the CA and server certificate EnsureGenerated keeps in a data dir.
type Generated struct {
	CertFile, KeyFile string // the server's certificate chain (server, then CA) and key
	CAFile            string
	CAFingerprint     string
}

// EnsureGenerated makes a CA (once) and a server certificate signed by it for hosts
// (names and IP addresses) in dir, all 0600. A server certificate that already covers
// every host and is not near its end is kept; otherwise a new one is made with the same CA,
// so clients that pinned the CA keep working.
func EnsureGenerated(dir string, hosts []string, now time.Time) (Generated, error) {
	g := Generated{
		CertFile: filepath.Join(dir, ServerFile),
		KeyFile:  filepath.Join(dir, ServerKeyFile),
		CAFile:   filepath.Join(dir, CAFile),
	}
	ca, caKey, err := loadOrMakeCA(dir, now)
	if err != nil {
		return Generated{}, err
	}
	g.CAFingerprint = Fingerprint(ca)
	if serverCovers(g.CertFile, ca, hosts, now) {
		return g, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Generated{}, fmt.Errorf("generating server key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "mlcompute engine"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(825 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return Generated{}, fmt.Errorf("signing server certificate: %w", err)
	}
	chain := append(pemBlock("CERTIFICATE", der), pemBlock("CERTIFICATE", ca.Raw)...)
	if err := writeKey(g.KeyFile, key); err != nil {
		return Generated{}, err
	}
	if err := writeFile(g.CertFile, chain); err != nil {
		return Generated{}, err
	}
	return g, nil
}

func loadOrMakeCA(dir string, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certPath, keyPath := filepath.Join(dir, CAFile), filepath.Join(dir, CAKeyFile)
	certPEM, err1 := os.ReadFile(certPath)
	keyPEM, err2 := os.ReadFile(keyPath)
	if err1 == nil && err2 == nil {
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, nil, fmt.Errorf("reading the engine's CA in %s: %w", certPath, err)
		}
		key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
		if !ok {
			return nil, nil, fmt.Errorf("reading the engine's CA in %s: the key is no ECDSA key", keyPath)
		}
		return pair.Leaf, key, nil
	}
	if !errors.Is(err1, os.ErrNotExist) && err1 != nil {
		return nil, nil, fmt.Errorf("reading the engine's CA: %w", err1)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "mlcompute engine CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("signing CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("parsing CA certificate: %w", err)
	}
	if err := writeKey(keyPath, key); err != nil {
		return nil, nil, err
	}
	if err := writeFile(certPath, pemBlock("CERTIFICATE", der)); err != nil {
		return nil, nil, err
	}
	return ca, key, nil
}

// serverCovers reports whether the certificate in path is signed by ca, names every host
// and has more than 30 days left.
func serverCovers(path string, ca *x509.Certificate, hosts []string, now time.Time) bool {
	raw, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	certs, err := ParseCertificates(raw)
	if err != nil || certs[0].CheckSignatureFrom(ca) != nil || now.Add(30*24*time.Hour).After(certs[0].NotAfter) {
		return false
	}
	for _, h := range hosts {
		if h != "" && certs[0].VerifyHostname(h) != nil {
			return false
		}
	}
	return true
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("encoding key: %w", err)
	}
	return writeFile(path, pemBlock("PRIVATE KEY", der))
}

// writeFile writes data to path with mode 0600, through a temporary file and a rename.
func writeFile(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// Pair makes (or keeps) the CA and server certificate for hosts in dir, as
// EnsureGenerated does, and returns the server's tls.Config for it and a client's that
// pins the CA: what a test or a benchmark of a TLS listener needs.
func Pair(dir string, hosts []string, now time.Time) (server, client *tls.Config, err error) {
	g, err := EnsureGenerated(dir, hosts, now)
	if err != nil {
		return nil, nil, err
	}
	if server, err = Server(g.CertFile, g.KeyFile); err != nil {
		return nil, nil, err
	}
	caPEM, err := os.ReadFile(g.CAFile)
	if err != nil {
		return nil, nil, err
	}
	if client, err = Client(caPEM); err != nil {
		return nil, nil, err
	}
	return server, client, nil
}

// Server returns the listeners' tls.Config for the certificate chain and key in the two
// PEM files: TLS 1.2 or later.
func Server(certFile, keyFile string) (*tls.Config, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("loading TLS certificate %s and key %s: %w", certFile, keyFile, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: MinVersion}, nil
}

// Client returns a client tls.Config that trusts caPEM's certificates, or the system roots
// when caPEM is empty. A server whose certificate does not chain to them is refused with
// an error naming the SHA-256 fingerprint of the CA it sent (or of its own certificate
// when it sent no CA), so the user can compare it with the one `serve` printed.
func Client(caPEM []byte) (*tls.Config, error) {
	var roots *x509.CertPool
	if len(bytes.TrimSpace(caPEM)) > 0 {
		certs, err := ParseCertificates(caPEM)
		if err != nil {
			return nil, fmt.Errorf("reading the CA certificate: %w", err)
		}
		roots = x509.NewCertPool()
		for _, c := range certs {
			roots.AddCert(c)
		}
	}
	return &tls.Config{
		MinVersion: MinVersion,
		// Verification is done below, with the same rules as crypto/tls's own, so that
		// the error can name the fingerprint the server showed.
		InsecureSkipVerify: true, //nolint:gosec // VerifyConnection verifies the chain and name.
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verify(cs, roots)
		},
	}, nil
}

// ErrUntrusted is wrapped by the error of a connection whose certificate does not chain
// to the pinned CA.
var ErrUntrusted = errors.New("the engine's certificate is not trusted")

// UntrustedError names what the server presented.
type UntrustedError struct {
	// Fingerprint is the SHA-256 fingerprint of the CA the server sent (the last
	// certificate of its chain).
	Fingerprint string
	Err         error
}

func (e *UntrustedError) Error() string {
	return fmt.Sprintf("%v: the engine presented a CA with SHA-256 fingerprint %s (compare it with the one `mlcompute serve` printed, then set ca_certificate, MLCOMPUTE_CA_CERT or run `mlcompute login`): %v",
		ErrUntrusted, e.Fingerprint, e.Err)
}

func (e *UntrustedError) Unwrap() error { return ErrUntrusted }

func verify(cs tls.ConnectionState, roots *x509.CertPool) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("the engine presented no certificate")
	}
	leaf := cs.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := leaf.Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: inter,
		DNSName:       cs.ServerName,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return &UntrustedError{Fingerprint: Fingerprint(cs.PeerCertificates[len(cs.PeerCertificates)-1]), Err: err}
	}
	return nil
}

// PEM encodes a DER certificate as a PEM CERTIFICATE block.
func PEM(der []byte) []byte { return pemBlock("CERTIFICATE", der) }
