// Package router is the engine's scoring router: one http.Handler that serves the scoring
// requests of every online endpoint on one listener and forwards each to an instance of one
// of the endpoint's deployments (DESIGN.md section 3, mlcompute_online_endpoint, "Scoring").
//
// The engine owns the routing table and pushes changes with SetEndpoint and RemoveEndpoint.
// The table is copy-on-write behind an atomic pointer: a request reads one consistent
// snapshot without locks, and an update never blocks or disturbs requests in flight.
// In-flight counts and counters are kept per instance and per deployment across updates, so
// replacing an endpoint (new traffic split, an instance that became ready) neither resets
// the concurrency limit nor the statistics.
//
// # Request flow
//
//  1. Route: the path is /{endpoint}/score or /{endpoint}/score/{rest} (ScoringPath);
//     anything else, or an unknown endpoint, is 404.
//  2. Authenticate: "Authorization: Bearer <credential>". In key mode the credential is
//     compared in constant time with both keys (SHA-256 digests, so neither the content nor
//     the length of a key leaks through timing); in aml_token mode Endpoint.TokenVerifier
//     decides. A missing or wrong credential is 401 and never reaches a deployment.
//  3. Choose the deployment: the request header azureml-model-deployment pins one (even one
//     with 0% traffic; an unknown name is 404 and the error lists the deployments);
//     otherwise a weighted random draw over Endpoint.Traffic. With no traffic anywhere and
//     no pin the answer is 503.
//  4. Choose the instance: among the Ready instances, the one with the fewest requests in
//     flight, ties broken round-robin. When every ready instance already holds
//     MaxConcurrentPerInstance requests, or none is ready, a deployment without a Hold
//     answers 429 (or 503: no ready instance) at once. The engine gives every deployment
//     a Hold (Deployment.Hold, hold.go): such a request is held, its Kick (autoscaled
//     deployments) tells the autoscaler at once, and it goes to the first instance with
//     room (a new table or a released slot wakes it) or gets 429 with Retry-After after
//     MaxWait; beyond MaxHeld held requests, 429 at once;
//     with a start error and no ready instance, 503 with it at once. The request timeout
//     starts when the request is sent to an instance, not while it is held. The event
//     loops hand such a request to the lean server, which holds it on its goroutine.
//     Instances draining out of a deployment stay in the table, not Ready, so their
//     requests in flight still count.
//  5. Proxy, with the deployment's request timeout: see "Forwarding" below.
//
// # Decisions
//
// Forwarding: a request whose body is at most 64 KiB, to a plain-HTTP instance, is the
// common case and takes the router's own HTTP/1.1 client: the body is read first (under
// the request timeout, so a client that stalls while sending it gets 504 too), then the
// request goes out in one write over a keep-alive connection pooled per instance, and
// the response is read on the handler's goroutine. A pooled connection the instance has
// closed is replaced by a fresh one, once, as http.Transport does. A connection idle
// for 90 s is not reused; idle connections are closed when their instance leaves the
// table and when the router closes (not by a timer, so an instance that gets no traffic
// keeps at most as many as it last had requests in flight).
// Such a request spends no context of its own: its timeout (a timer kept, with the rest
// of the per-request state, in a pool and re-armed for the next request) and its
// client's going away (AfterClientGone of the engine's server, or one context.AfterFunc
// on the request's context under net/http) abort the instance connection or the dial
// the request is waiting on directly.
// Larger or streaming bodies, protocol upgrades, HTTPS instances, queries
// httputil.ReverseProxy would re-encode, and every request when Options.Transport is
// set, go through httputil.ReverseProxy over the transport. Both paths forward the same
// headers and answer with the same statuses; only the first drops an instance's interim
// (1xx) responses instead of passing them on, as it has already sent the whole body.
//
// Path forwarded: the backend receives its own base path (usually empty) followed by the
// part of the request path after the endpoint name, so /{endpoint}/score becomes /score
// and /{endpoint}/score/explain becomes /score/explain; the query string is kept. A
// deployment's command therefore serves POST /score, as Azure's inference server does. Every
// method is forwarded, not only POST.
//
// Headers forwarded: all but the hop-by-hop ones (and any named in Connection) and
// Authorization, which is the endpoint's credential and means nothing to a model. The
// router sets X-Request-Id (the client's own when it is a sane token of at most 128
// printable characters, a fresh UUID otherwise) on the upstream request and on every
// response, and sets azureml-model-deployment on the response to the deployment that
// served it, as Azure does. X-Forwarded-For, -Host and -Proto are set.
//
// Timeout status: a request still running after the deployment's RequestTimeout is
// cancelled upstream (the connection to the instance is closed, so the instance's request
// context ends) and gets 504 Gateway Timeout. A client that goes away before its answer
// cancels the instance's request the same way. RFC 9110
// defines 408 Request Timeout as the server giving up on a client that did not finish
// sending its request; generic HTTP clients and intermediaries treat 408 as "the
// connection was idle, retry", which would silently re-run a slow model. 504 says what
// happened: the gateway did not get a timely answer from upstream. (Azure answers 408
// here; DESIGN allows either, and clients of this engine see the code "timeout" in the JSON
// body either way.) The timeout covers the whole exchange, response body included: a
// response that is cut by it is aborted, never passed off as complete.
//
// Retry: when the connection to the chosen instance cannot even be opened (a dial error,
// such as connection refused because the instance died), nothing of the request has been
// sent, so it is retried once on another ready instance of the same deployment that has
// room. Any other failure, or a second dial failure, is 502. Requests are never retried
// once any byte of the body may have been read. A kept-alive connection to an instance is
// checked before it carries a request, and one the instance closed in the meantime is
// replaced by a fresh one; should the instance close it just as a request goes out, the
// request is sent again only if it is idempotent (GET, HEAD, OPTIONS, TRACE, or an
// Idempotency-Key header), as in http.Transport: a request a model crashed on is never
// handed to it a second time.
//
// Mirroring: for an unpinned request, when the endpoint mirrors to a deployment other
// than the one chosen, a second draw of Rand below percent/100 sends a copy. The body is
// buffered (up to Options.MaxMirrorBodyBytes, 10 MiB by default; a larger body is not
// mirrored) and the copy goes out on its own goroutine, after the mirror deployment
// grants it an instance slot without waiting (a copy is dropped, never queued, when every
// mirror instance is full). Its response is read and discarded and never reaches the
// client, and the client's response never waits for it. Copies hold slots only in the
// mirror deployment, never in the primary one. Requests pinned with
// azureml-model-deployment are not mirrored: the caller chose a deployment explicitly,
// and mirroring exists to shadow live, traffic-split requests.
//
// Rand: Options.Rand is called once per unpinned request to choose the deployment
// (deployments are laid out in name order, each covering its share of [0, 1)), and once
// more, after an instance was found, when the request is eligible for mirroring.
//
// Performance: the engine serves the scoring listener with LoopServer (loop.go). Its
// event loops (github.com/panjf2000/gnet/v2, one per core) read client and instance
// connections themselves and serve the usual request (usual for leanserver, arrived whole,
// to an endpoint that mirrors nothing and whose instances speak plain HTTP, with a valid
// credential) without any goroutine: routing, limits, timeout, retry and headers are the
// ones above, the response is passed on as it arrives (its framing followed only to find
// its end, a body delimited by the instance's close re-framed as chunked, interim 1xx
// responses dropped). Anything else is handed off, connection and bytes read, to
// internal/engine/router/leanserver running the router as an http.Handler, which in turn hands what
// it does not serve to net/http. A Go server on the net package pays a goroutine wake-up
// each way per request and a read that finds nothing before each wait; tools/bench -mode
// router prints both I/O models' floors next to nginx and the router. With TLSConfig the
// loops serve TLS too: each connection's handshake runs on a goroutine, then crypto/tls's
// record layer works on buffers the loop fills and sends (loop_tls.go).
//
// Errors written by the router are JSON: {"error":{"code":"...","message":"..."}}, the
// same envelope as the engine API (see Error), so one client decoder reads both.
package router
