package endpointapi

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/quota"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

// The endpoints' side of the workspace quota (DESIGN 4): what each deployment holds in the
// quota index, the check on create and update, and the same check for a plan
// (POST .../quota:check).

// holdings is what an endpoint's deployments hold of its workspace's quota, by deployment
// (model.QuotaIndex): max_instances, or instance_count, times the size's vCPUs.
func holdings(workspace, endpoint string, deployments map[string]model.Deployment) map[string]model.Holding {
	out := make(map[string]model.Holding, len(deployments))
	for dn, d := range deployments {
		size, ok := catalog.Lookup(d.Spec.InstanceType)
		if !ok {
			continue
		}
		count, _ := validation.DeploymentQuotaCount(d.Spec)
		out[dn] = model.Holding{Workspace: workspace, Name: "endpoint " + endpoint + " deployment " + dn,
			Family: size.Family, VCPUs: quota.Holds(count, size.VCPUs)}
	}
	return out
}

// checkQuota checks that each deployment whose holding is new or changed (from prev, the
// endpoint's stored deployments) fits ws's quota of its VM family, next to what the
// workspace's computes, its other endpoints and the endpoint's other deployments hold:
// the one sum of DESIGN 4, from the quota index. Callers that write are in turn.
func (a *API) checkQuota(ws *api.Workspace, key string, deployments, prev map[string]model.Deployment) error {
	if a.quota == nil {
		return nil
	}
	workspace, endpoint := model.WorkspaceOf(key), model.NameOf(key)
	now, before := holdings(workspace, endpoint, deployments), holdings(workspace, endpoint, prev)
	stored := a.quota.EndpointKeys(key)
	for _, dn := range slices.Sorted(maps.Keys(now)) {
		h := now[dn]
		if old, ok := before[dn]; ok && old == h {
			continue // a description or a probe changed, not what it holds
		}
		var holders []quota.Holder
		for _, o := range a.quota.Holders(workspace, h.Family, stored...) {
			holders = append(holders, quota.Holder{Name: o.Name, VCPUs: o.VCPUs})
		}
		used := []int64{a.quota.Used(workspace, h.Family, stored...)}
		for _, sib := range slices.Sorted(maps.Keys(now)) {
			if o := now[sib]; sib != dn && o.Family == h.Family {
				used = append(used, o.VCPUs)
				holders = append(holders, quota.Holder{Name: o.Name, VCPUs: o.VCPUs})
			}
		}
		size, _ := catalog.Lookup(deployments[dn].Spec.InstanceType)
		if err := deploymentQuota(workspace, dn, deployments[dn].Spec, size, quota.Used(used...),
			model.EffectiveQuota(ws, h.Family), holders); err != nil {
			return err
		}
	}
	return nil
}

// CheckQuota answers a planned endpoint's quota check (POST .../quota:check) as its create
// or update would, changing nothing: each deployment's instance_type, instance_count and
// scale_settings count, and one that holds what the stored endpoint's does is not checked
// again. quotas, when not nil, stands in for the workspace's stored quotas.
func (a *API) CheckQuota(_ context.Context, workspace string, quotas map[string]int64, spec api.EndpointSpec) error {
	if err := validation.EndpointName.Check("name", spec.Name); err != nil {
		return err
	}
	deployments := make(map[string]model.Deployment, len(spec.Deployments))
	for dn, d := range spec.Deployments {
		size, err := validation.VMSize("deployments."+dn+".instance_type", d.InstanceType, catalog.OnlineDeployment)
		if err != nil {
			return err
		}
		d.InstanceType = size.Name
		deployments[dn] = model.Deployment{Spec: d}
	}
	return a.store.View(func(tx *store.Tx) error {
		ws, err := model.GetWorkspace(tx, workspace)
		if err != nil {
			return err
		}
		if quotas != nil {
			ws.Quotas = quotas
		}
		var prev map[string]model.Deployment
		if rec, err := model.GetEndpoint(tx, workspace, spec.Name); err == nil {
			prev = rec.Deployments
		} else if !api.IsNotFound(err) {
			return err
		}
		return a.checkQuota(ws, workspace+"/"+spec.Name, deployments, prev)
	})
}

// holdQuota records in the quota index what the endpoint's deployments hold, inside the
// write that stores them (the store runs one write at a time, so the next check, of a
// compute or an endpoint, counts them). The returned func puts back what was recorded
// before, for a write that did not commit. Callers are in turn.
func (a *API) holdQuota(key string, deployments map[string]model.Deployment) (undo func()) {
	if a.quota == nil {
		return func() {}
	}
	old := a.quota.EndpointHoldings(key)
	a.quota.SetEndpoint(key, holdings(model.WorkspaceOf(key), model.NameOf(key), deployments))
	return func() { a.quota.SetEndpoint(key, old) }
}

// LoadQuotaIndex records what the stored endpoints hold in the quota index, once, when the
// engine is built.
func (a *API) LoadQuotaIndex() error {
	if a.quota == nil {
		return nil
	}
	return a.store.View(func(tx *store.Tx) error {
		eps, err := store.List[model.Endpoint](tx, store.Endpoints, "")
		for _, rec := range eps {
			a.quota.SetEndpoint(rec.Key(), holdings(rec.Workspace, rec.Name, rec.Deployments))
		}
		return err
	})
}

// deploymentQuota checks that deployment's instances of size (validation.DeploymentQuotaCount) fit
// workspace's quota of the size's family: the count × vCPUs, with used vCPUs held by
// others (holders names them, for the message), within limit. Every product and sum is
// checked (rules/quota). The error is on "deployments.<deployment>." + the count's attribute.
func deploymentQuota(workspace, deployment string, d api.DeploymentSpec, size catalog.Size, used, limit int64, holders []quota.Holder) error {
	count, attr := validation.DeploymentQuotaCount(d)
	name := attr[strings.LastIndex(attr, ".")+1:]
	field := "deployments." + deployment + "." + attr
	want, ok := quota.Demand(count, size.VCPUs)
	dec := quota.Check(used, want, limit)
	if ok && dec.Fits {
		return nil
	}
	by := ""
	if len(holders) > 0 {
		names := make([]string, 0, len(holders))
		for _, h := range holders {
			names = append(names, fmt.Sprintf("%s (%d vCPUs)", h.Name, h.VCPUs))
		}
		by = fmt.Sprintf(" (already used by %s)", strings.Join(names, ", "))
	}
	if !ok {
		return api.Errorf(api.CodeQuotaExceeded, field,
			"deployment %q: %s = %d of %s needs more vCPUs than any quota can hold; lower %s", deployment, name, count, size.Name, name)
	}
	return api.Errorf(api.CodeQuotaExceeded, field,
		"deployment %q: %s = %d of %s needs %d vCPUs of family %s, but workspace %q has %d of its %d left%s; lower %s to %d or raise the workspace's quotas = { %s = %d }",
		deployment, name, count, size.Name, want, size.Family, workspace, dec.Left, limit, by, name, dec.Left/max(size.VCPUs, 1), size.Family, dec.Need)
}
