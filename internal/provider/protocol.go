package provider

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sync/atomic"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/defaults"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
)

// This file is the provider's protocol server: the framework's, with the two calls that a
// refresh and a no-change plan make once per compute cluster answered directly on the
// plugin protocol. The framework walks all 26 attribute paths of the cluster's schema on
// each of them (decoding, defaults, plan modifiers, path lookups), which on a plan of many
// clusters costs more than terraform's own work; answered here, the same result costs one
// decode and one encode. Whatever the fast path is not sure to answer exactly as the
// framework would, it hands to the framework, so the framework stays the definition.
//
// What it saves, measured with tools/bench -mode terraform at 100 clusters (medians of 3
// runs on 2 busy cores, against the do-nothing provider): a no-change plan takes 1.09x and
// 1.26x the floor with it, 1.66x and 1.86x without. protocol_diff_test.go generates its
// differential cases from the schema (every attribute's prior and configured values, private
// state, identities, deferrals) and compares every answer with the framework's.

// clusterTypeName is the cluster resource's type name.
const clusterTypeName = "mlcompute_compute_cluster"

// NewProtocol6Server returns a constructor of the provider's protocol server, as
// tf6server.Serve and the acceptance tests' provider factories want it. Each server has
// its own provider instance, whose engine client the fast path uses once configured.
func NewProtocol6Server(version string) func() (tfprotov6.ProviderServer, error) {
	return func() (tfprotov6.ProviderServer, error) {
		p := &mlcomputeProvider{version: version}
		fw, err := providerserver.NewProtocol6WithError(p)()
		if err != nil {
			return nil, err
		}
		s := &protocolServer{ProviderServer: fw, provider: p}
		if s.cluster, err = newClusterFastPath(); err != nil {
			return nil, err
		}
		if servesDestroy(os.Getenv, parentCommandLine) {
			return newDestroyServer(s), nil
		}
		return s, nil
	}
}

// protocolServer is the framework's server with the cluster's fast path in front.
type protocolServer struct {
	tfprotov6.ProviderServer
	provider *mlcomputeProvider
	cluster  *clusterFastPath
}

// clusterFastPath holds what the fast path needs of the cluster's schema, worked out once.
type clusterFastPath struct {
	stateType tftypes.Object
	// defaults are the attributes with a default: where the configuration leaves one null,
	// the framework plans the default, so a no-change plan must find it in state already.
	defaults []attributeDefault
}

type attributeDefault struct {
	path  *tftypes.AttributePath
	value tftypes.Value
}

func newClusterFastPath() (*clusterFastPath, error) {
	ctx := context.Background()
	var resp resource.SchemaResponse
	NewComputeClusterResource().Schema(ctx, resource.SchemaRequest{}, &resp)
	t, ok := resp.Schema.Type().TerraformType(ctx).(tftypes.Object)
	if !ok {
		return nil, fmt.Errorf("%s: the schema is not an object", clusterTypeName)
	}
	f := &clusterFastPath{stateType: t}
	if err := f.collectDefaults(ctx, tftypes.NewAttributePath(), resp.Schema.Attributes); err != nil {
		return nil, fmt.Errorf("%s: %w", clusterTypeName, err)
	}
	return f, nil
}

// collectDefaults records the default of every attribute under p that has one.
func (f *clusterFastPath) collectDefaults(ctx context.Context, p *tftypes.AttributePath, attrs map[string]schema.Attribute) error {
	for name, a := range attrs {
		ap := p.WithAttributeName(name)
		var v attr.Value
		switch a := a.(type) {
		case schema.StringAttribute:
			if a.Default != nil {
				var r defaults.StringResponse
				a.Default.DefaultString(ctx, defaults.StringRequest{}, &r)
				v = r.PlanValue
			}
		case schema.Int64Attribute:
			if a.Default != nil {
				var r defaults.Int64Response
				a.Default.DefaultInt64(ctx, defaults.Int64Request{}, &r)
				v = r.PlanValue
			}
		case schema.BoolAttribute:
			if a.Default != nil {
				var r defaults.BoolResponse
				a.Default.DefaultBool(ctx, defaults.BoolRequest{}, &r)
				v = r.PlanValue
			}
		case schema.MapAttribute:
			if a.Default != nil {
				var r defaults.MapResponse
				a.Default.DefaultMap(ctx, defaults.MapRequest{}, &r)
				v = r.PlanValue
			}
		case schema.SingleNestedAttribute:
			if a.Default != nil {
				return fmt.Errorf("%s: a nested object's default is not supported by the fast path", ap)
			}
			if err := f.collectDefaults(ctx, ap, a.Attributes); err != nil {
				return err
			}
			continue
		default:
			// A kind the fast path does not know could hide a default; refusing it here
			// fails NewProtocol6Server, which every test of the provider builds first.
			if _, nested := a.(schema.NestedAttribute); nested {
				return fmt.Errorf("%s: %T is not supported by the fast path", ap, a)
			}
			if hasDefault(a) {
				return fmt.Errorf("%s: the default of a %T is not supported by the fast path", ap, a)
			}
			continue
		}
		if v == nil {
			continue
		}
		tv, err := v.ToTerraformValue(ctx)
		if err != nil {
			return fmt.Errorf("%s: default: %w", ap, err)
		}
		f.defaults = append(f.defaults, attributeDefault{path: ap, value: tv})
	}
	return nil
}

// hasDefault reports whether an attribute of a kind the fast path does not list has a
// default, which would make it unsure of the framework's plan.
func hasDefault(a schema.Attribute) bool {
	switch a := a.(type) {
	case schema.Float64Attribute:
		return a.Default != nil
	case schema.NumberAttribute:
		return a.Default != nil
	case schema.ListAttribute:
		return a.Default != nil
	case schema.SetAttribute:
		return a.Default != nil
	case schema.ObjectAttribute:
		return a.Default != nil
	case schema.Int32Attribute:
		return a.Default != nil
	case schema.Float32Attribute:
		return a.Default != nil
	case schema.DynamicAttribute:
		return a.Default != nil
	}
	return true // unknown kind: assume the worst
}

// PlanResourceChange answers a cluster's plan that changes nothing with the prior state.
// The framework would plan exactly that: when the proposed state is the prior state and no
// default replaces a value, it marks nothing unknown, the plan modifiers keep every value
// (UseStateForUnknown has nothing unknown, RequiresReplace sees no change) and the
// resource's ModifyPlan checks and warns only about what changes.
func (s *protocolServer) PlanResourceChange(ctx context.Context, req *tfprotov6.PlanResourceChangeRequest) (*tfprotov6.PlanResourceChangeResponse, error) {
	if req.TypeName == clusterTypeName && s.cluster.unchanged(req) {
		return &tfprotov6.PlanResourceChangeResponse{PlannedState: req.PriorState}, nil
	}
	return s.ProviderServer.PlanResourceChange(ctx, req)
}

// unchanged reports whether req plans no change the fast path can answer: the proposed
// state is byte for byte the prior state (terraform encodes both the same way), there is
// no private state to carry, no resource identity (the framework owns identities, and
// refuses one for a resource without an identity schema), and no attribute left null in the
// configuration has a default other than its value in state.
func (f *clusterFastPath) unchanged(req *tfprotov6.PlanResourceChangeRequest) bool {
	if req.PriorState == nil || req.ProposedNewState == nil || req.Config == nil || len(req.PriorPrivate) != 0 ||
		req.PriorIdentity != nil ||
		len(req.PriorState.MsgPack) == 0 || !bytes.Equal(req.PriorState.MsgPack, req.ProposedNewState.MsgPack) {
		return false
	}
	prior, err := req.PriorState.Unmarshal(f.stateType)
	if err != nil || prior.IsNull() || !prior.IsFullyKnown() {
		return false
	}
	config, err := req.Config.Unmarshal(f.stateType)
	if err != nil {
		return false
	}
	for _, d := range f.defaults {
		configured, _, err := tftypes.WalkAttributePath(config, d.path)
		if err != nil {
			// A parent object is null: the framework sets no default under it.
			continue
		}
		if v, ok := configured.(tftypes.Value); !ok || !v.IsNull() {
			continue
		}
		inState, _, err := tftypes.WalkAttributePath(prior, d.path)
		if v, ok := inState.(tftypes.Value); err != nil || !ok || !v.Equal(d.value) {
			return false
		}
	}
	return true
}

// ReadResource refreshes a cluster with one engine call and no framework walk. Anything
// but a plain success (no engine client yet, a state it cannot parse, an engine error, a
// compute of another type) goes to the framework's Read, which reports it in full.
func (s *protocolServer) ReadResource(ctx context.Context, req *tfprotov6.ReadResourceRequest) (*tfprotov6.ReadResourceResponse, error) {
	if req.TypeName == clusterTypeName {
		var resp *tfprotov6.ReadResourceResponse
		if resp, ctx = s.cluster.read(ctx, s.provider.engine(), req); resp != nil {
			return resp, nil
		}
	}
	return s.ProviderServer.ReadResource(ctx, req)
}

// read returns the refreshed state, or nil to leave the call to the framework, with the
// context to call it with.
func (f *clusterFastPath) read(ctx context.Context, c *client.Client, req *tfprotov6.ReadResourceRequest) (*tfprotov6.ReadResourceResponse, context.Context) {
	if c == nil || req.CurrentState == nil || len(req.Private) != 0 || req.CurrentIdentity != nil {
		return nil, ctx
	}
	state, err := req.CurrentState.Unmarshal(f.stateType)
	if err != nil || state.IsNull() || !state.IsFullyKnown() {
		return nil, ctx
	}
	idValue, _, err := tftypes.WalkAttributePath(state, tftypes.NewAttributePath().WithAttributeName("id"))
	var rawID string
	if v, ok := idValue.(tftypes.Value); err != nil || !ok || v.IsNull() || v.As(&rawID) != nil {
		return nil, ctx
	}
	id, err := api.ParseID(rawID, api.CollectionComputes)
	if err != nil {
		return nil, ctx
	}
	compute, err := c.GetCompute(ctx, id.Workspace, id.Name)
	if err != nil || compute.Type != api.TypeComputeCluster {
		return nil, withComputeRead(ctx, id, compute, err)
	}
	read := withComputeRead(ctx, id, compute, nil)
	newState, err := clusterState(f.stateType, state, compute)
	if err != nil {
		return nil, read
	}
	dv, err := tfprotov6.NewDynamicValue(f.stateType, newState)
	if err != nil {
		return nil, read
	}
	return &tfprotov6.ReadResourceResponse{NewState: &dv}, ctx
}

// computeReadKey is the context key of a compute the fast path has already read.
type computeReadKey struct{}

type computeRead struct {
	id      api.ID
	compute *api.Compute
	err     error
}

// withComputeRead carries the engine's answer for id to the framework's Read, so that a
// call the fast path hands on does not ask the engine twice (or wait twice for one that
// does not answer).
func withComputeRead(ctx context.Context, id api.ID, c *api.Compute, err error) context.Context {
	return context.WithValue(ctx, computeReadKey{}, computeRead{id: id, compute: c, err: err})
}

// getCompute returns the compute id, as the fast path read it if it did, else from the engine.
func getCompute(ctx context.Context, c *client.Client, id api.ID) (*api.Compute, error) {
	if r, ok := ctx.Value(computeReadKey{}).(computeRead); ok && r.id == id {
		return r.compute, r.err
	}
	return c.GetCompute(ctx, id.Workspace, id.Name)
}

// engineClient holds the engine client of a configured provider for the fast path.
type engineClient = atomic.Pointer[client.Client]
