// Package leanserver is an HTTP/1.1 server for a listener whose requests are nearly all
// alike, such as the engine's scoring listener: it serves the usual request itself, at a
// fraction of net/http's cost, and hands every connection that sends anything else to a
// net/http server, which then serves that connection to its end.
//
// # Why not net/http alone
//
// A handler that does nothing, served by net/http, costs about as much CPU per request on
// loopback as nginx spends proxying one (tools/bench -mode router prints both). Profiles
// put that cost in the server, not the handler: a goroutine started per request for a
// background read of the connection (so that a client going away cancels the request's
// context), the deadline juggling that stops it again, textproto's allocating header
// parser, and the response's chunk writer. The scoring router's own work is a few
// percent of it. A well-kept alternative server such as fasthttp does not fit: it has its
// own request and response types, so the router (an http.Handler, like everything else
// in the engine and its tests) would need a second implementation, and it has no way to
// hand an unusual request (a protocol upgrade, a chunked upload) to net/http as it came.
//
// # The usual request
//
// A connection is served here while each request is: HTTP/1.1, in origin form (a path
// starting with "/" that needs no unescaping), with its head within the 4 KiB read buffer,
// exactly one Host header, valid header names and values, no line folding, and a body
// framed by at most one Content-Length (or none). It must not use Transfer-Encoding,
// Expect, Upgrade, or the HEAD, CONNECT or PRI methods. The first request that is not
// usual, and everything after it on that connection, goes to the net/http server as the
// client sent it: nothing of it has been consumed. So a malformed request gets exactly
// net/http's answer, and anything this server does not implement (upgrades, chunked
// bodies, 100-continue) gets net/http's implementation.
//
// For a usual request the handler gets an *http.Request like net/http's: canonical header
// keys, Host, RemoteAddr, RequestURI, ContentLength, a Body that reads from the
// connection, and a context carrying http.ServerContextKey (the fallback server) and
// http.LocalAddrContextKey that is cancelled when the handler returns. The response
// writer follows net/http's rules too: a Date header, Content-Type sniffed when the
// handler sets none, Content-Length for a body the handler finished writing before the
// first flush and chunked encoding otherwise, trailers (declared in the Trailer header or
// prefixed with http.TrailerPrefix), 1xx informational responses, no body for 204 and
// 304, "Connection: close" when the client asked for it or the server is shutting down,
// http.ErrAbortHandler to cut a response, and http.ResponseController's Flush and read
// and write deadlines.
//
// # A client that goes away
//
// net/http watches every request's connection from a second goroutine. Here a request is
// watched only once its handler has run for watchDelay: a model that answers within it
// costs no second goroutine, and one that runs longer is watched as net/http would, so
// its client's going away (the connection closed or reset) cancels the request's context
// at most watchDelay late. Like net/http, the connection is watched only after the
// handler has read the whole body. watchDelay runs on Server.Clock, so a test on a fake
// clock steps it to start the watch.
//
// # TLS
//
// On a listener that accepts *tls.Conn (tls.NewListener), each connection is served as
// net/http serves one: its handshake runs first, under Server.ReadHeaderTimeout for
// reading and writing; a client that sends plain HTTP gets net/http's 400 "Client sent
// an HTTP request to an HTTPS server" and the connection closes; a failed handshake goes
// to Server.HandshakeFailed (or ErrorLog). Every request then has Request.TLS, one
// tls.ConnectionState per connection as in net/http, and so does every request of a
// connection handed to the net/http server (which sees the connection wrapped, not the
// *tls.Conn: its ConnContext and handler carry the state over). A connection that
// negotiated another protocol than HTTP/1.1 by ALPN (HTTP/2, when the listener's
// tls.Config offers it) goes to the net/http server as it is, right after the handshake.
//
// Server.Handshake is that handshake on its own, for a server that runs its own TLS
// connections (the router's event loops). A connection such a server hands over after
// its handshake says its state (a ConnectionState method, as *tls.Conn has): it gets no
// handshake here, and its requests carry that state.
//
// # Timeouts
//
// Server.ReadHeaderTimeout bounds reading a request head, as in net/http: for a
// connection's first request from the moment it is accepted (after the TLS handshake),
// for later ones from their first byte. Server.IdleTimeout bounds the wait for the next
// request on a kept-alive connection (zero: no limit, as net/http with neither
// IdleTimeout nor ReadTimeout). A request's body has no deadline of its own: the handler
// sets one with http.ResponseController when it wants.
package leanserver
