//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/template"
	"time"
)

// nginxConfig is the reverse proxy the router is compared with. It is tuned the way an
// operator would tune nginx in front of one model server, so the comparison is fair:
// a worker per core, reuseport listeners, access log off, HTTP/1.1 with a pool of
// keep-alive connections to the backend that is never recycled by request count (Go's
// transport and server never do that either), and the per-request work the router does
// as far as nginx can express it: check the key, strip it, set the X-Forwarded-* and
// X-Request-Id headers, name the deployment on the response. In the TLS pass it serves
// TLS 1.2 or later on the router's certificate. Every path is in the
// scratch dir, so it runs without root and touches nothing of a system nginx.
var nginxConfig = template.Must(template.New("nginx.conf").Parse(`# Written by tools/bench for one run; deleted afterwards.
{{- if .User}}
user {{.User}};
{{- end}}
daemon off;
master_process on;
worker_processes {{.Workers}};
worker_rlimit_nofile 65536;
pid {{.Dir}}/nginx.pid;
error_log {{.Dir}}/error.log warn;

events {
    worker_connections 16384;
}

http {
    access_log off;
    client_body_temp_path {{.Dir}}/client_body;
    proxy_temp_path {{.Dir}}/proxy;
    fastcgi_temp_path {{.Dir}}/fastcgi;
    uwsgi_temp_path {{.Dir}}/uwsgi;
    scgi_temp_path {{.Dir}}/scgi;

    tcp_nodelay on;
    keepalive_timeout 75s;
    keepalive_requests 1000000;

    upstream model {
        server {{.Backend}};
        keepalive {{.Keepalive}};
        keepalive_requests 1000000;
        keepalive_timeout 90s;
    }

    server {
        listen {{.Listen}} reuseport{{if .TLSCert}} ssl{{end}};
{{- if .TLSCert}}
        ssl_certificate {{.TLSCert}};
        ssl_certificate_key {{.TLSKey}};
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_session_cache shared:SSL:10m;
        ssl_session_timeout 1h;
{{- end}}

        location = {{.Path}} {
            if ($http_authorization != "Bearer {{.Key}}") {
                return 401;
            }
            proxy_pass http://model/score;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Authorization "";
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Host $host;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_set_header X-Request-Id $request_id;
            add_header X-Request-Id $request_id always;
            add_header azureml-model-deployment {{.Deployment}} always;
        }
    }
}
`))

// nginxSettings fill nginxConfig.
type nginxSettings struct {
	Dir        string // scratch dir: pid, error log, temp paths
	User       string // worker user and group when running as root, else ""
	Workers    int
	Listen     string // host:port
	Backend    string // host:port
	Keepalive  int    // idle upstream connections each worker keeps
	Path       string // the scoring path proxied to the backend's /score
	Key        string
	Deployment string
	// TLSCert and TLSKey, when set, serve TLS 1.2 or later with this chain and key (the
	// router's, from tlsconfig), with a session cache as an operator would configure it.
	TLSCert, TLSKey string
}

// nginxProc is a running nginx master (in the foreground) and its workers.
type nginxProc struct {
	cmd     *exec.Cmd
	errLog  string
	exited  chan struct{}
	waitErr error
}

// startNginx writes the config into s.Dir and starts nginx on it. nginx has no way to
// inherit a listener from us, so the port was chosen free a moment ago; a lost race
// shows as nginx exiting with "Address already in use" in the error.
func startNginx(binary string, s nginxSettings) (*nginxProc, error) {
	var conf bytes.Buffer
	if err := nginxConfig.Execute(&conf, s); err != nil {
		return nil, err
	}
	confPath := filepath.Join(s.Dir, "nginx.conf")
	if err := os.WriteFile(confPath, conf.Bytes(), 0o600); err != nil {
		return nil, err
	}
	p := &nginxProc{errLog: filepath.Join(s.Dir, "error.log"), exited: make(chan struct{})}
	// -e: the log nginx writes before it has read the config (it defaults to a system path).
	p.cmd = exec.Command(binary, "-p", s.Dir+"/", "-e", p.errLog, "-c", confPath)
	var out bytes.Buffer
	p.cmd.Stdout, p.cmd.Stderr = &out, &out
	// Its own process group, so the workers can be killed with the master if it hangs.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting nginx: %w", err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		if out.Len() > 0 {
			p.waitErr = fmt.Errorf("%w\n%s", p.waitErr, tail(out.String(), 20))
		}
		close(p.exited)
	}()
	return p, nil
}

// failure explains why nginx is not serving: its exit status and its error log.
// pids lists nginx's master and worker processes.
func (p *nginxProc) pids() []int {
	return append([]int{p.cmd.Process.Pid}, childPids(p.cmd.Process.Pid)...)
}

func (p *nginxProc) failure() error {
	select {
	case <-p.exited:
		log, _ := os.ReadFile(p.errLog)
		return fmt.Errorf("nginx exited: %v\n%s", p.waitErr, tail(string(log), 20))
	default:
		return nil
	}
}

// stop shuts nginx down (SIGQUIT: workers finish their requests and exit) and waits for
// it; if it does not exit in time, the whole process group is killed.
func (p *nginxProc) stop() error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-p.exited:
		return nil
	case <-time.After(10 * time.Second):
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
	return errors.New("nginx did not stop within 10s of SIGQUIT and was killed")
}

// nginxUser is the user directive for a root master: nginx's compiled-in default group
// ("nobody") does not exist on Debian, so name nobody's own primary group.
func nginxUser() (string, error) {
	if os.Geteuid() != 0 {
		return "", nil
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		return "", fmt.Errorf("finding a user for nginx workers: %w", err)
	}
	g, err := user.LookupGroupId(u.Gid)
	if err != nil {
		return "", fmt.Errorf("finding a group for nginx workers: %w", err)
	}
	return u.Username + " " + g.Name, nil
}

// nginxVersion is "nginx/1.22.1", from nginx -v (which prints to stderr).
func nginxVersion(ctx context.Context, binary string) string {
	out, _ := exec.CommandContext(ctx, binary, "-v").CombinedOutput()
	for _, f := range strings.Fields(string(out)) {
		if strings.HasPrefix(f, "nginx/") {
			return f
		}
	}
	return "nginx"
}

// freeLoopbackPort returns a loopback port that was free a moment ago.
func freeLoopbackPort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), nil
}
