// Package model holds what the engine stores, the records (workspaces, computes with their
// instance or attached parts, nodes, jobs, endpoints) with their keys and the store
// look-ups every controller shares, and the in-memory indexes over them: what would
// otherwise mean decoding every record of a bucket on every call. An index is rebuilt from
// the store when the engine starts and is updated by the writer after each commit, under
// the engine's write lock, so it always describes the committed store.
package model

import (
	"maps"
	"slices"
	"sync"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/quota"
)

// Holding is what one compute, or one deployment of an online endpoint, holds of its
// workspace's quota.
type Holding struct {
	Workspace string
	// Name names the holder in a quota error: a compute's name, or "endpoint E deployment D".
	Name   string
	Family string
	// VCPUs is max_node_count (a deployment: max_instances, or instance_count when it is not
	// autoscaled) times the size's vCPUs (checked: see quota.Demand).
	VCPUs int64
}

// QuotaIndex sums the vCPUs computes and endpoint deployments hold per workspace and
// family: the one sum both check against (DESIGN 4: max_instances counts against the
// workspace's quota), so a quota check costs the same at the 10,000th compute as at the
// first. It is safe for concurrent use.
type QuotaIndex struct {
	mu        sync.RWMutex
	byCompute map[string]Holding // compute key or DeploymentQuotaKey -> holding
	byFamily  map[familyKey]int64
	// byEndpoint lists the DeploymentQuotaKeys of each endpoint key.
	byEndpoint map[string][]string
}

type familyKey struct{ workspace, family string }

// NewQuotaIndex returns an empty index.
func NewQuotaIndex() *QuotaIndex {
	return &QuotaIndex{byCompute: map[string]Holding{}, byFamily: map[familyKey]int64{}, byEndpoint: map[string][]string{}}
}

// DeploymentQuotaKey is the index key of an endpoint's deployment; no compute key looks like
// it (compute names hold no colon).
func DeploymentQuotaKey(endpointKey, deployment string) string {
	return "endpoint:" + endpointKey + "/" + deployment
}

// SetEndpoint replaces what the endpoint under endpointKey holds by holdings, keyed by
// deployment name; nil forgets the endpoint.
func (ix *QuotaIndex) SetEndpoint(endpointKey string, holdings map[string]Holding) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for _, k := range ix.byEndpoint[endpointKey] {
		ix.removeLocked(k)
	}
	delete(ix.byEndpoint, endpointKey)
	for _, dn := range slices.Sorted(maps.Keys(holdings)) {
		k := DeploymentQuotaKey(endpointKey, dn)
		ix.setLocked(k, holdings[dn])
		ix.byEndpoint[endpointKey] = append(ix.byEndpoint[endpointKey], k)
	}
}

// EndpointHoldings returns what the endpoint under endpointKey holds, keyed by deployment
// name (to restore it when a write that changed it did not commit).
func (ix *QuotaIndex) EndpointHoldings(endpointKey string) map[string]Holding {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	prefix := len(DeploymentQuotaKey(endpointKey, ""))
	out := map[string]Holding{}
	for _, k := range ix.byEndpoint[endpointKey] {
		out[k[prefix:]] = ix.byCompute[k]
	}
	return out
}

// EndpointKeys returns the index keys of the endpoint's deployments, to leave out of Used
// when the endpoint's new deployments are checked.
func (ix *QuotaIndex) EndpointKeys(endpointKey string) []string {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return slices.Clone(ix.byEndpoint[endpointKey])
}

// Set records (or replaces) what the compute under key holds.
func (ix *QuotaIndex) Set(key string, h Holding) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.setLocked(key, h)
}

func (ix *QuotaIndex) setLocked(key string, h Holding) {
	ix.removeLocked(key)
	ix.byCompute[key] = h
	fk := familyKey{h.Workspace, h.Family}
	// The sum the provider's plan check makes too (quota.Used), kept as the holdings change.
	ix.byFamily[fk] = quota.Used(ix.byFamily[fk], h.VCPUs)
}

// Get returns the holding under key.
func (ix *QuotaIndex) Get(key string) (Holding, bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	h, ok := ix.byCompute[key]
	return h, ok
}

// Delete forgets the compute under key.
func (ix *QuotaIndex) Delete(key string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.removeLocked(key)
}

func (ix *QuotaIndex) removeLocked(key string) {
	old, ok := ix.byCompute[key]
	if !ok {
		return
	}
	delete(ix.byCompute, key)
	fk := familyKey{old.Workspace, old.Family}
	if left := ix.byFamily[fk] - old.VCPUs; left > 0 {
		ix.byFamily[fk] = left
	} else {
		delete(ix.byFamily, fk)
	}
}

// Used returns the vCPUs the workspace's computes and deployments of family hold, leaving
// out the holdings under except (the ones being checked, whose new demand replaces their
// stored one).
func (ix *QuotaIndex) Used(workspace, family string, except ...string) int64 {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	used := ix.byFamily[familyKey{workspace, family}]
	for _, k := range except {
		if h, ok := ix.byCompute[k]; ok && h.Workspace == workspace && h.Family == family {
			used -= h.VCPUs
		}
	}
	return max(used, 0)
}

// Holders lists the computes and deployments of the workspace holding vCPUs of family, but
// those under except, by name. It scans every holding: it is for the text of a quota error,
// not for the check.
func (ix *QuotaIndex) Holders(workspace, family string, except ...string) []Holding {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	var out []Holding
	for _, key := range slices.Sorted(maps.Keys(ix.byCompute)) {
		if h := ix.byCompute[key]; !slices.Contains(except, key) && h.Workspace == workspace && h.Family == family {
			out = append(out, h)
		}
	}
	return out
}
