// Package routertable is what the scoring router serves of an endpoint's record: its
// credentials, its live and mirrored split, and per deployment the instances that take
// requests and how requests wait for one. It is a pure mapping; the endpoints controller
// pushes its result to the router before the write that stores the record commits.
package routertable

import (
	"maps"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

// Hooks are the parts of the table that call back into the engine.
type Hooks struct {
	// VerifyToken checks an AML token of the endpoint.
	VerifyToken func(token string) bool
	// Hold completes a deployment's Hold with the callbacks of its autoscaler and metrics;
	// nil leaves it as Hold makes it.
	Hold func(deployment string, d model.Deployment, h *router.Hold)
}

// Of is the router's table of an endpoint: its deployments (those retiring too, while
// traffic still goes to them) with their ready instances as backends, draining ones as
// backends that take no request (their requests in flight still count), the live and
// mirrored split, and the credentials.
func Of(rec model.Endpoint, hooks Hooks) router.Endpoint {
	ep := router.Endpoint{
		Name: rec.Name, AuthMode: rec.AuthMode,
		Keys:          [2]string{rec.Keys.PrimaryKey, rec.Keys.SecondaryKey},
		Traffic:       map[string]int{},
		Mirror:        map[string]int{},
		Deployments:   map[string]*router.Deployment{},
		TokenVerifier: hooks.VerifyToken,
	}
	for k, v := range rec.LiveTraffic {
		ep.Traffic[k] = int(v)
	}
	for k, v := range rec.MirrorTraffic {
		ep.Mirror[k] = int(v)
	}
	deployments := maps.Clone(rec.Deployments)
	maps.Copy(deployments, rec.Retiring)
	for dn, d := range deployments {
		rd := &router.Deployment{Name: dn}
		if rs := d.Spec.RequestSettings; rs != nil {
			rd.MaxConcurrentPerInstance = int(rs.MaxConcurrentRequestsPerInstance)
			rd.RequestTimeout = time.Duration(rs.RequestTimeoutMS) * time.Millisecond
		}
		ready := false
		for _, in := range rec.Instances {
			if in.Deployment != dn || in.Terminating || in.Host == "" {
				continue
			}
			u := &url.URL{Scheme: "http", Host: net.JoinHostPort(in.Host, strconv.Itoa(in.Port))}
			switch in.State {
			case api.EndpointInstanceReady:
				rd.Backends = append(rd.Backends, router.Backend{ID: in.ID, URL: u, Ready: true})
				ready = true
			case api.EndpointInstanceDraining:
				rd.Backends = append(rd.Backends, router.Backend{ID: in.ID, URL: u})
			}
		}
		rd.Hold = Hold(d, ready)
		if hooks.Hold != nil {
			hooks.Hold(dn, d, rd.Hold)
		}
		ep.Deployments[dn] = rd
	}
	return ep
}

// Hold is how a deployment's requests wait: a request that finds every ready instance busy
// waits up to max_queue_wait_ms for one with room, as Azure's managed endpoints queue it,
// before it gets 429. An autoscaled deployment also holds requests while it has no ready
// instance (up to twice max_concurrent_requests_per_instance per max_instances), so one at
// zero instances can start one; a fixed one with no ready instance answers 503 at once,
// with the deployment's start error when it has one.
func Hold(d model.Deployment, ready bool) *router.Hold {
	sc := d.Spec.ScaleSettings
	rs := d.Spec.RequestSettings
	maxConc, wait := int64(api.DefaultMaxConcurrentRequestsPerInstance), int64(validation.DefaultMaxQueueWait(sc))
	if rs != nil {
		maxConc = max(rs.MaxConcurrentRequestsPerInstance, 1)
		if rs.MaxQueueWaitMS > 0 {
			wait = rs.MaxQueueWaitMS
		}
	}
	h := &router.Hold{
		MaxWait: time.Duration(wait) * time.Millisecond,
		MaxHeld: 2 * maxConc * d.Spec.InstanceCount,
	}
	if sc.Autoscaled() {
		h.MaxHeld = 2 * maxConc * sc.MaxInstances
		h.WhileStarting = true
	}
	if !ready {
		h.StartError = d.StartError
	}
	return h
}
