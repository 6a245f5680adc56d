package endpointapi

import (
	"maps"
	"slices"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/rollout"
)

// describeEndpoint is an endpoint as the API shows it.
func (a *API) describeEndpoint(rec model.Endpoint) api.Endpoint {
	out := api.Endpoint{
		ID: api.EndpointID(rec.Workspace, rec.Name), Workspace: rec.Workspace, Name: rec.Name,
		AuthMode: rec.AuthMode, Description: rec.Description, Tags: rec.Tags,
		Traffic: rec.Traffic, MirrorTraffic: rec.MirrorTraffic, LiveTraffic: rec.LiveTraffic, CreatedOn: rec.CreatedOn,
		Deployments: map[string]api.Deployment{},
	}
	if base := a.scoring.BaseURL(); base != "" {
		out.ScoringURI = base + router.ScoringPath(rec.Name)
	}
	var errs []string
	stats := a.scoring.Stats(rec.Name)
	for _, name := range slices.Sorted(maps.Keys(rec.Deployments)) {
		d := rec.Deployments[name]
		ad := api.Deployment{DeploymentSpec: d.Spec, Generation: d.Generation, Instances: []api.EndpointInstance{},
			DesiredInstances: d.Target(), ScaleDecisions: d.Decisions}
		if st, ok := stats[name]; ok {
			ad.RequestsInFlight, ad.HeldRequests = st.InFlight, st.Held
		}
		for _, in := range rec.Instances {
			if in.Deployment != name {
				continue
			}
			ad.Instances = append(ad.Instances, api.EndpointInstance{ID: in.ID, State: in.State, Generation: in.Generation, Restarts: in.Restarts, StartedAt: in.StartedAt})
			if in.Generation == d.Generation && in.State == api.EndpointInstanceReady {
				ad.ReadyInstances++
			}
		}
		out.Deployments[name] = ad
		if d.Error != "" {
			errs = append(errs, "deployment "+name+": "+d.Error)
		}
	}
	switch {
	case rec.Deleting:
		out.ProvisioningState = api.ProvisioningDeleting
	case len(errs) > 0:
		out.ProvisioningState, out.Error = api.ProvisioningFailed, strings.Join(errs, "; ")
	case !rec.Provisioned:
		out.ProvisioningState = api.ProvisioningCreating
	case !rollout.Settled(rec):
		out.ProvisioningState = api.ProvisioningUpdating
	default:
		out.ProvisioningState = api.ProvisioningSucceeded
	}
	return out
}
