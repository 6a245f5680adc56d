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

// Holding is what one compute holds of its workspace's quota.
type Holding struct {
	Workspace string
	Name      string
	Family    string
	// VCPUs is max_node_count times the size's vCPUs (checked: see quota.Demand).
	VCPUs int64
}

// QuotaIndex sums the vCPUs computes hold per workspace and family, so a quota check costs
// the same at the 10,000th compute as at the first. It is safe for concurrent use.
type QuotaIndex struct {
	mu        sync.RWMutex
	byCompute map[string]Holding // compute key -> holding
	byFamily  map[familyKey]int64
}

type familyKey struct{ workspace, family string }

// NewQuotaIndex returns an empty index.
func NewQuotaIndex() *QuotaIndex {
	return &QuotaIndex{byCompute: map[string]Holding{}, byFamily: map[familyKey]int64{}}
}

// Set records (or replaces) what the compute under key holds.
func (ix *QuotaIndex) Set(key string, h Holding) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.removeLocked(key)
	ix.byCompute[key] = h
	fk := familyKey{h.Workspace, h.Family}
	// The sum the provider's plan check makes too (quota.Used), kept as the holdings change.
	ix.byFamily[fk] = quota.Used(ix.byFamily[fk], h.VCPUs)
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

// Used returns the vCPUs the workspace's computes of family hold, leaving out the compute
// under except (the one being checked, whose new demand replaces its stored one).
func (ix *QuotaIndex) Used(workspace, family, except string) int64 {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	used := ix.byFamily[familyKey{workspace, family}]
	if h, ok := ix.byCompute[except]; ok && h.Workspace == workspace && h.Family == family {
		used -= h.VCPUs
	}
	return used
}

// Holders lists the computes of the workspace holding vCPUs of family, but except, by name.
// It scans every holding: it is for the text of a quota error, not for the check.
func (ix *QuotaIndex) Holders(workspace, family, except string) []Holding {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	var out []Holding
	for _, key := range slices.Sorted(maps.Keys(ix.byCompute)) {
		if h := ix.byCompute[key]; key != except && h.Workspace == workspace && h.Family == family {
			out = append(out, h)
		}
	}
	return out
}
