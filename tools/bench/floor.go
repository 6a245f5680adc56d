//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/panjf2000/gnet/v2"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router/gnetlog"
)

// The floors of the scoring comparison (-mode router). Each is the thinnest HTTP/1.1
// proxy of one I/O model: it forwards each request's bytes unchanged to the model server,
// on a connection of its own opened with the client's, and the answer's bytes back,
// framing messages by Content-Length alone. It does none of the work of the router or of
// the nginx configuration (no key check, no headers, no shared pool, no timer, no
// metrics), so its throughput bounds what any proxy of its model reaches on this machine
// and load:
//
//   - "net": a goroutine per connection on Go's net package and its netpoller, the model
//     of net/http and of the router;
//   - "gnet": event loops on epoll, one per core (github.com/panjf2000/gnet/v2), the
//     model of nginx.
//
// Each runs in a process of its own (this binary with -serve-floor=net|gnet), which reads
// the model server's address from stdin, prints its own, and exits when stdin closes.

// floorModels are the values of -serve-floor, in the order of their rows.
var floorModels = []string{"net", "gnet"}

// startFloorProc starts the floor proxy of a model with GOMAXPROCS set to workers and
// reads the address it listens on.
func startFloorProc(model, backend string, workers int) (*helperProc, error) {
	return startHelper("the "+model+" floor proxy", "-serve-floor="+model,
		[]string{"GOMAXPROCS=" + strconv.Itoa(workers)}, []byte(backend))
}

// serveFloorProcess is -serve-floor: it serves the floor proxy of model until stdin closes.
func serveFloorProcess(model string, stdin io.Reader, stdout io.Writer) error {
	in := bufio.NewReader(stdin)
	line, err := in.ReadString('\n')
	if err != nil {
		return fmt.Errorf("reading the model server's address: %w", err)
	}
	backend := strings.TrimSpace(line)
	port, err := freeLoopbackPort()
	if err != nil {
		return err
	}
	addr := "127.0.0.1:" + port
	failed := make(chan error, 1)
	switch model {
	case "net":
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		defer ln.Close()
		go func() { failed <- serveFloorNet(ln, backend) }()
	case "gnet":
		baddr, err := net.ResolveTCPAddr("tcp", backend)
		if err != nil {
			return err
		}
		f := &floorGnet{backend: baddr, booted: make(chan struct{})}
		go func() {
			failed <- gnet.Run(f, "tcp://"+addr,
				gnet.WithNumEventLoop(runtime.GOMAXPROCS(0)), gnet.WithReusePort(true),
				gnet.WithTCPNoDelay(gnet.TCPNoDelay), gnet.WithLoadBalancing(gnet.LeastConnections),
				gnet.WithLogger(gnetlog.New(hclog.New(&hclog.LoggerOptions{Name: "gnet", Level: hclog.Warn, Output: os.Stderr}))))
		}()
		select {
		case <-f.booted:
		case err := <-failed:
			return err
		}
		defer func() { _ = f.engine.Stop(context.Background()) }()
	default:
		return fmt.Errorf("-serve-floor=%q: must be one of %s", model, strings.Join(floorModels, ", "))
	}
	if _, err := fmt.Fprintln(stdout, addr); err != nil {
		return err
	}
	closed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, in)
		close(closed)
	}()
	select {
	case <-closed:
		return nil // the benchmark is over
	case err := <-failed:
		return err
	}
}

// messageLength returns the length of the first whole HTTP/1.1 message in b (its head,
// and as many body bytes as its Content-Length says), or 0 while b holds less.
func messageLength(b []byte) int {
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 {
		return 0
	}
	const name = "content-length:"
	length := 0
	for head := b[:end+2]; len(head) > 0; {
		i := bytes.IndexByte(head, '\n')
		line := head[:i+1]
		head = head[i+1:]
		if len(line) > len(name) && bytes.EqualFold(line[:len(name)], []byte(name)) {
			length, _ = strconv.Atoi(string(bytes.TrimSpace(line[len(name):])))
		}
	}
	if len(b) < end+4+length {
		return 0
	}
	return end + 4 + length
}

// serveFloorNet is the net floor: a goroutine per client connection, each with its own
// connection to the model server.
func serveFloorNet(ln net.Listener, backend string) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			b, err := net.Dial("tcp", backend)
			if err != nil {
				return
			}
			defer b.Close()
			var requests, answers messageReader
			for {
				req, err := requests.next(c)
				if err != nil {
					return
				}
				if _, err := b.Write(req); err != nil {
					return
				}
				answer, err := answers.next(b)
				if err != nil {
					return
				}
				if _, err := c.Write(answer); err != nil {
					return
				}
			}
		}()
	}
}

// messageReader reads whole HTTP/1.1 messages from a connection into one buffer.
type messageReader struct {
	buf  []byte
	used int // the length of the message next returned last, dropped by the following call
}

// next returns the next whole message, valid until the following call.
func (m *messageReader) next(r io.Reader) ([]byte, error) {
	m.buf = m.buf[:copy(m.buf, m.buf[m.used:])]
	m.used = 0
	for {
		if n := messageLength(m.buf); n > 0 {
			m.used = n
			return m.buf[:n], nil
		}
		if len(m.buf) == cap(m.buf) {
			m.buf = slices.Grow(m.buf, max(4096, cap(m.buf)))
		}
		n, err := r.Read(m.buf[len(m.buf):cap(m.buf)])
		m.buf = m.buf[:len(m.buf)+n]
		if err != nil {
			return nil, err
		}
	}
}

// floorGnet is the gnet floor: each client connection gets its model server connection
// on the same event loop, so forwarding is a write from the loop that read.
type floorGnet struct {
	gnet.BuiltinEventEngine
	backend net.Addr
	booted  chan struct{} // closed once engine is set and the listener open
	engine  gnet.Engine
}

// floorPair is a client connection and its model server connection, the context of both.
type floorPair struct {
	client, backend gnet.Conn
	early           [][]byte // requests that came before the model server connection opened
}

func (f *floorGnet) OnBoot(e gnet.Engine) gnet.Action {
	f.engine = e
	close(f.booted)
	return gnet.None
}

func (f *floorGnet) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	if p, ok := c.Context().(*floorPair); ok { // the model server connection of p
		p.backend = c
		for _, req := range p.early {
			_, _ = c.Write(req)
		}
		p.early = nil
		return nil, gnet.None
	}
	p := &floorPair{client: c}
	c.SetContext(p)
	ctx := gnet.NewContext(gnet.NewNetAddrContext(context.Background(), f.backend), p)
	if _, err := c.EventLoop().Register(ctx, f.backend); err != nil {
		return nil, gnet.Close
	}
	return nil, gnet.None
}

func (f *floorGnet) OnTraffic(c gnet.Conn) gnet.Action {
	p := c.Context().(*floorPair)
	for {
		buf, _ := c.Peek(-1)
		n := messageLength(buf)
		if n == 0 {
			return gnet.None
		}
		switch {
		case c == p.backend:
			_, _ = p.client.Write(buf[:n])
		case p.backend != nil:
			_, _ = p.backend.Write(buf[:n])
		default:
			p.early = append(p.early, slices.Clone(buf[:n]))
		}
		_, _ = c.Discard(n)
	}
}

func (f *floorGnet) OnClose(c gnet.Conn, _ error) gnet.Action {
	p, ok := c.Context().(*floorPair)
	switch {
	case !ok:
	case c == p.client && p.backend != nil:
		_ = p.backend.Close()
	case c == p.backend:
		_ = p.client.Close()
	}
	return gnet.None
}
