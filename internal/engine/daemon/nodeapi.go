package daemon

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/instances"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/tlsconfig"
)

// ActivityKeyFile holds the key of the activity tokens instances' processes get, in the
// data dir (0600), made once so tokens survive a restart.
const ActivityKeyFile = "activity.key"

// nodeAPI says how processes on an instance's node reach this engine to report activity:
// the API address as the node sees it, the CA to pin, and the token key. A node of the
// local driver shares this machine, so it reaches a unix socket or a loopback listener; a
// node elsewhere (Slurm, Kubernetes) reaches only a TCP listener off loopback, and gets no
// endpoint otherwise.
func nodeAPI(opts Options, driverName string) (instances.NodeAPI, error) {
	key, _, err := ensureSecretFile(filepath.Join(opts.DataDir, ActivityKeyFile), "an activity key")
	if err != nil {
		return instances.NodeAPI{}, err
	}
	out := instances.NodeAPI{Key: []byte(key)}
	listen := opts.Listen
	if listen == "" {
		listen = "unix://" + filepath.Join(opts.DataDir, SocketFile)
	}
	u, err := url.Parse(listen)
	if err != nil {
		return out, nil // listen reports the address's error
	}
	local := driverName == "local"
	switch u.Scheme {
	case "unix":
		if local {
			out.Endpoint = "unix://" + u.Path
		}
	case "tcp":
		host, port, err := net.SplitHostPort(u.Host)
		if err != nil || port == "0" {
			return out, nil
		}
		loopback := IsLoopbackHost(host)
		if loopback && !local {
			return out, nil
		}
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			// A wildcard listener: local nodes use loopback, others this machine's name.
			if local {
				host = "127.0.0.1"
			} else if host, err = os.Hostname(); err != nil {
				return out, nil
			}
		}
		scheme := "http"
		if opts.TLS.wants(host) {
			scheme = "https"
			if opts.TLS.CertFile == "" {
				out.CACertFile = filepath.Join(opts.DataDir, tlsconfig.CAFile)
			}
		}
		out.Endpoint = fmt.Sprintf("%s://%s", scheme, net.JoinHostPort(host, port))
	}
	return out, nil
}
