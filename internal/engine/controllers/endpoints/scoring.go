package endpoints

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// TokenLifetime is how long an AML token is valid, as in Azure.
const TokenLifetime = time.Hour

// Meta keys of the endpoint runtime.
const (
	metaScoringListen = "scoring_listen"
	metaTokenSecret   = "token_secret"
)

// tokenClaims is what an AML token asserts: which endpoint it opens, until when.
type tokenClaims struct {
	Endpoint string `json:"ep"`
	Expires  int64  `json:"exp"`
}

// GetEndpointToken issues an AML token for an aml_token endpoint: base64url(claims) "."
// base64url(HMAC-SHA256(claims)) under a secret kept in the store, so tokens survive an
// engine restart and are bound to one endpoint.
func (c *Controller) GetEndpointToken(_ context.Context, workspace, name string) (*api.EndpointToken, error) {
	var rec model.Endpoint
	err := c.store.View(func(tx *store.Tx) error {
		var err error
		rec, err = model.GetEndpoint(tx, workspace, name)
		return err
	})
	if err != nil {
		return nil, err
	}
	if rec.AuthMode != api.AuthModeAMLToken {
		return nil, api.Errorf(api.CodeInvalid, "auth_mode", "online endpoint %q uses auth_mode %q: read its keys instead, or set auth_mode = %q to use tokens", name, rec.AuthMode, api.AuthModeAMLToken)
	}
	secret, err := c.tokenSecret()
	if err != nil {
		return nil, err
	}
	exp := c.clock.Now().UTC().Add(TokenLifetime).Truncate(time.Second)
	claims, _ := json.Marshal(tokenClaims{Endpoint: rec.Key(), Expires: exp.Unix()})
	payload := base64.RawURLEncoding.EncodeToString(claims)
	return &api.EndpointToken{AccessToken: payload + "." + sign(secret, payload), ExpiresOn: exp}, nil
}

// VerifyToken is the router's TokenVerifier for one endpoint.
func (c *Controller) VerifyToken(workspace, name, token string) bool {
	payload, mac, ok := strings.Cut(token, ".")
	if !ok {
		return false
	}
	secret, err := c.tokenSecret()
	if err != nil || !hmac.Equal([]byte(mac), []byte(sign(secret, payload))) {
		return false
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	var claims tokenClaims
	if err != nil || json.Unmarshal(raw, &claims) != nil {
		return false
	}
	return claims.Endpoint == workspace+"/"+name && c.clock.Now().Unix() < claims.Expires
}

func sign(secret []byte, payload string) string {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// tokenSecret returns the token signing secret, made on first use and kept in the store.
func (c *Controller) tokenSecret() ([]byte, error) {
	if s := c.secret.Load(); s != nil {
		return *s, nil
	}
	var secret []byte
	err := c.store.Update(func(tx *store.Tx) error {
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
	c.secret.Store(&secret)
	return secret, nil
}

// ScoringHandler is the scoring router: serve it on the scoring listener.
func (c *Controller) ScoringHandler() http.Handler { return c.router }

// ScoringRouter is the scoring router itself, for the event-loop server.
func (c *Controller) ScoringRouter() *router.Router { return c.router }

// ScoringStats returns the router's counters per deployment of an endpoint (nil when the
// router does not serve it). Counters start at zero when the engine starts.
func (c *Controller) ScoringStats(endpoint string) map[string]router.DeploymentStats {
	return c.router.Stats(endpoint)
}

// CloseScoring stops the router's mirror copies; call it after the scoring listener stopped.
func (c *Controller) CloseScoring() { c.router.Close() }

// ListenScoring opens the scoring router's listener. With addr empty it reuses the address
// of the first start (kept in the store), or picks a free loopback port and keeps it, so
// scoring URIs never change across restarts. Serve ScoringHandler on the listener.
func (c *Controller) ListenScoring(addr string) (net.Listener, error) {
	var kept string
	if addr == "" {
		if err := c.store.View(func(tx *store.Tx) error {
			_, err := tx.Get(store.Meta, metaScoringListen, &kept)
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
		if err := c.store.Update(func(tx *store.Tx) error { return tx.Put(store.Meta, metaScoringListen, actual) }); err != nil {
			ln.Close()
			return nil, err
		}
	}
	base := "http://" + actual
	c.base.Store(&base)
	c.log.Info("scoring router listening", "address", actual)
	return ln, nil
}

// ScoringOverTLS makes scoring_uri https://, for a scoring listener the engine serves
// with TLS. Called after ListenScoring, before the engine starts.
func (c *Controller) ScoringOverTLS() {
	if b := c.base.Load(); b != nil {
		https := "https://" + strings.TrimPrefix(*b, "http://")
		c.base.Store(&https)
	}
}

// clockWithAfterFunc gives the router the engine's clock when it can schedule callbacks
// (the real and the fake clock both can).
func clockWithAfterFunc(c clock.WithTicker) clock.WithDelayedExecution {
	if d, ok := c.(clock.WithDelayedExecution); ok {
		return d
	}
	return clock.RealClock{}
}
