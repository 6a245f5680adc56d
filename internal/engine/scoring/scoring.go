// Package scoring is the engine's scoring front, owned by the composition root: the router
// that carries endpoint traffic, the listener address that scoring URIs keep across
// restarts, and the AML tokens the router accepts. The endpoints controller keeps the
// router's table in step with the store through it; it never binds a socket itself.
package scoring

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"k8s.io/utils/clock"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// TokenLifetime is how long an AML token is valid, as in Azure.
const TokenLifetime = time.Hour

// Meta keys of the scoring front.
const (
	metaListen      = "scoring_listen"
	metaTokenSecret = "token_secret"
)

// Front is the scoring router with its listener address and token secret, both kept in
// the engine's store.
type Front struct {
	*router.Router
	store  *store.Store
	clock  clock.PassiveClock
	log    hclog.Logger
	base   atomic.Pointer[string]
	secret atomic.Pointer[[]byte]
}

// New builds the scoring front on the engine's store and clock; opts adjusts its router
// (the logger and clock are the front's). Call Listen before the engine starts, and Close
// after the listener stopped.
func New(st *store.Store, clk clock.WithTicker, log hclog.Logger, opts router.Options) *Front {
	opts.Logger, opts.Clock = log, withAfterFunc(clk)
	return &Front{Router: router.New(opts), store: st, clock: clk, log: log.Named("scoring")}
}

// withAfterFunc gives the router the engine's clock when it can schedule callbacks (the
// real and the fake clock both can).
func withAfterFunc(c clock.WithTicker) clock.WithDelayedExecution {
	if d, ok := c.(clock.WithDelayedExecution); ok {
		return d
	}
	return clock.RealClock{}
}

// BaseURL is the scheme and address of the scoring listener ("http://127.0.0.1:PORT"),
// which endpoints' scoring URIs start with; "" before Listen.
func (f *Front) BaseURL() string {
	if p := f.base.Load(); p != nil {
		return *p
	}
	return ""
}

// Listen opens the scoring listener. With addr empty it reuses the address of the first
// start (kept in the store), or picks a free loopback port and keeps it, so scoring URIs
// never change across restarts. Serve the router on the listener.
func (f *Front) Listen(addr string) (net.Listener, error) {
	var kept string
	if addr == "" {
		if err := f.store.View(func(tx *store.Tx) error {
			_, err := tx.Get(store.Meta, metaListen, &kept)
			return err
		}); err != nil {
			return nil, err
		}
		addr = kept
		if addr == "" {
			addr = "127.0.0.1:0"
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if kept != "" {
			return nil, fmt.Errorf("listening for scoring requests on %s, the address of this engine's endpoints' scoring_uri: %w (free the port, or choose another with --scoring-listen, which changes scoring_uri)", kept, err)
		}
		return nil, fmt.Errorf("listening for scoring requests on %s: %w", addr, err)
	}
	actual := ln.Addr().String()
	if actual != kept {
		if err := f.store.Update(func(tx *store.Tx) error { return tx.Put(store.Meta, metaListen, actual) }); err != nil {
			ln.Close()
			return nil, err
		}
	}
	base := "http://" + actual
	f.base.Store(&base)
	f.log.Info("scoring router listening", "address", actual)
	return ln, nil
}

// OverTLS makes the scoring URIs https://, for a listener the engine serves with TLS.
// Called after Listen, before the engine starts.
func (f *Front) OverTLS() {
	if b := f.base.Load(); b != nil {
		https := "https://" + strings.TrimPrefix(*b, "http://")
		f.base.Store(&https)
	}
}

// Handler is the router as an http.Handler, for a net/http server.
func (f *Front) Handler() http.Handler { return f.Router }

// tokenClaims is what an AML token asserts: which endpoint it opens, until when.
type tokenClaims struct {
	Endpoint string `json:"ep"`
	Expires  int64  `json:"exp"`
}

// IssueToken issues an AML token for the endpoint of key ("workspace/name"):
// base64url(claims) "." base64url(HMAC-SHA256(claims)) under a secret kept in the store,
// so tokens survive an engine restart and are bound to one endpoint.
func (f *Front) IssueToken(endpointKey string) (token string, expires time.Time, err error) {
	secret, err := f.tokenSecret()
	if err != nil {
		return "", time.Time{}, err
	}
	expires = f.clock.Now().UTC().Add(TokenLifetime).Truncate(time.Second)
	claims, _ := json.Marshal(tokenClaims{Endpoint: endpointKey, Expires: expires.Unix()})
	payload := base64.RawURLEncoding.EncodeToString(claims)
	return payload + "." + sign(secret, payload), expires, nil
}

// VerifyToken says whether token is an unexpired AML token for the endpoint of key.
func (f *Front) VerifyToken(endpointKey, token string) bool {
	payload, mac, ok := strings.Cut(token, ".")
	if !ok {
		return false
	}
	secret, err := f.tokenSecret()
	if err != nil || !hmac.Equal([]byte(mac), []byte(sign(secret, payload))) {
		return false
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	var claims tokenClaims
	if err != nil || json.Unmarshal(raw, &claims) != nil {
		return false
	}
	return claims.Endpoint == endpointKey && f.clock.Now().Unix() < claims.Expires
}

func sign(secret []byte, payload string) string {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// tokenSecret returns the token signing secret, made on first use and kept in the store.
func (f *Front) tokenSecret() ([]byte, error) {
	if s := f.secret.Load(); s != nil {
		return *s, nil
	}
	var secret []byte
	err := f.store.Update(func(tx *store.Tx) error {
		var enc string
		ok, err := tx.Get(store.Meta, metaTokenSecret, &enc)
		if err != nil {
			return err
		}
		if ok {
			secret, err = base64.RawStdEncoding.DecodeString(enc)
			return err
		}
		secret = make([]byte, 32)
		_, _ = rand.Read(secret)
		return tx.Put(store.Meta, metaTokenSecret, base64.RawStdEncoding.EncodeToString(secret))
	})
	if err != nil {
		return nil, fmt.Errorf("reading the token secret: %w", err)
	}
	f.secret.Store(&secret)
	return secret, nil
}
