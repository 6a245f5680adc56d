package engine

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

// Online endpoints: this file holds the records and the API operations. The runtime that
// turns a record into running instances (and the scoring router's table) lives in
// endpoint_runtime.go (probes in endpoint_probes.go, events and adoption in
// endpoint_events.go); the scoring listener and AML tokens in endpoint_scoring.go.

// endpointRecord is an online endpoint as stored, keyed "<workspace>/<name>". Its instances
// are stored in it, so an engine that restarts adopts them (their nodes are known) rather
// than releasing them as orphans.
type endpointRecord struct {
	Workspace     string                      `json:"workspace"`
	Name          string                      `json:"name"`
	AuthMode      string                      `json:"auth_mode"`
	Description   string                      `json:"description,omitempty"`
	Tags          map[string]string           `json:"tags,omitempty"`
	Deployments   map[string]deploymentRecord `json:"deployments"`
	Traffic       map[string]int64            `json:"traffic,omitempty"`
	MirrorTraffic map[string]int64            `json:"mirror_traffic,omitempty"`
	// LiveTraffic is the split the router applies. It becomes Traffic once every deployment
	// Traffic sends requests to has rolled out; until then the previous split stays, so an
	// apply that adds green and gives it all traffic never routes to a green with nothing
	// ready yet.
	LiveTraffic map[string]int64 `json:"live_traffic,omitempty"`
	// Retiring holds removed deployments that LiveTraffic still sends requests to: their
	// instances serve until the split moves, then drain.
	Retiring  map[string]deploymentRecord `json:"retiring,omitempty"`
	Keys      api.EndpointKeys            `json:"keys"`
	CreatedOn time.Time                   `json:"created_on"`
	// Provisioned is set once every deployment had all its instances ready: Creating ends.
	Provisioned bool `json:"provisioned,omitempty"`
	// Deleting is committed before any instance is terminated, so a crash mid-delete
	// resumes the delete.
	Deleting  bool               `json:"deleting,omitempty"`
	Instances []endpointInstance `json:"instances,omitempty"`
}

// deploymentRecord is one deployment: its spec with defaults filled and the size in the
// catalog's spelling, and its generation.
type deploymentRecord struct {
	Spec       api.DeploymentSpec `json:"spec"`
	Generation int64              `json:"generation"`
	// Error says why the deployment cannot become ready; cleared once an instance of it is.
	Error string `json:"error,omitempty"`
}

// endpointInstance is one instance: a node of the engine's driver running the deployment's
// command as a task.
type endpointInstance struct {
	// ID is also the node's driver key, chosen and committed before the driver is called.
	ID         string `json:"id"`
	Deployment string `json:"deployment"`
	Generation int64  `json:"generation"`
	Host       string `json:"host,omitempty"`
	// Port is chosen by the engine and passed as PORT; kept across restarts.
	Port int `json:"port"`
	// Task is the driver key of the current process; a new one per restart.
	Task      string    `json:"task"`
	State     string    `json:"state"`
	Restarts  int64     `json:"restarts"`
	StartedAt time.Time `json:"started_at,omitempty"`
	// Failures counts consecutive starts that ended (exit, or readiness never passing)
	// before the instance was ready once.
	Failures int64 `json:"failures,omitempty"`
	// EverReady is set once the current process passed its readiness probe.
	EverReady bool `json:"ever_ready,omitempty"`
	// RestartAt, when set, is when a failed instance is started again.
	RestartAt time.Time `json:"restart_at,omitempty"`
	// DrainUntil is when a draining instance is terminated: its requests have had the
	// deployment's whole request timeout to finish by then.
	DrainUntil time.Time `json:"drain_until,omitempty"`
	// Terminating is set before the node is terminated; the instance goes once the driver
	// confirms.
	Terminating bool `json:"terminating,omitempty"`
	// Process is what the instance runs, fixed at its creation: a restart during a rollout
	// runs the instance's own generation, not the new one.
	Process instanceProcess `json:"process"`
}

// instanceProcess is the part of a deployment that makes an instance's process.
type instanceProcess struct {
	InstanceType         string            `json:"instance_type"`
	Command              []string          `json:"command"`
	EnvironmentVariables map[string]string `json:"environment_variables,omitempty"`
	SnapshotID           string            `json:"snapshot_id,omitempty"`
}

func processOf(d api.DeploymentSpec) instanceProcess {
	return instanceProcess{InstanceType: d.InstanceType, Command: d.Command, EnvironmentVariables: d.EnvironmentVariables, SnapshotID: d.SnapshotID}
}

func (r endpointRecord) key() string { return r.Workspace + "/" + r.Name }

// deployment returns a deployment by name, a retiring one included.
func (r endpointRecord) deployment(name string) (deploymentRecord, bool) {
	if d, ok := r.Deployments[name]; ok {
		return d, true
	}
	d, ok := r.Retiring[name]
	return d, ok
}

// rolledOut reports whether a deployment has its instance_count of ready instances of its
// current generation.
func (r endpointRecord) rolledOut(name string) bool {
	d, ok := r.Deployments[name]
	if !ok {
		return false
	}
	var ready int64
	for _, in := range r.Instances {
		if in.Deployment == name && in.Generation == d.Generation && in.State == api.EndpointInstanceReady && !in.Terminating {
			ready++
		}
	}
	return ready >= d.Spec.InstanceCount
}

// trafficRolledOut reports whether every deployment the declared split sends requests to
// has rolled out.
func (r endpointRecord) trafficRolledOut() bool {
	for name, percent := range r.Traffic {
		if percent > 0 && !r.rolledOut(name) {
			return false
		}
	}
	return true
}

// moveTraffic makes the declared split live once every deployment it sends requests to
// has rolled out, and lets go of the retiring deployments the live split no longer uses.
func (r *endpointRecord) moveTraffic() {
	if !maps.Equal(r.LiveTraffic, r.Traffic) && r.trafficRolledOut() {
		r.LiveTraffic = maps.Clone(r.Traffic)
	}
	for name := range r.Retiring {
		if r.LiveTraffic[name] == 0 {
			delete(r.Retiring, name)
		}
	}
}

// endpointDirtyKey is an endpoint's key in the controller's work set; the prefix keeps it
// apart from a compute of the same name.

func (e *Engine) kickEndpoint(key string) { e.loop.Mark(runtime.EndpointKey(key)) }

// CreateEndpoint creates an online endpoint and starts its deployments. Idempotent under
// the key like CreateCompute.
func (e *Engine) CreateEndpoint(_ context.Context, workspace string, spec api.EndpointSpec, idempotencyKey string) (*api.Endpoint, error) {
	if err := validation.Endpoint(spec); err != nil {
		return nil, err
	}
	deployments, err := e.deploymentRecords(spec.Deployments, nil)
	if err != nil {
		return nil, err
	}
	if spec.AuthMode == "" {
		spec.AuthMode = api.AuthModeKey
	}
	rec := endpointRecord{
		Workspace: workspace, Name: spec.Name, AuthMode: spec.AuthMode, Description: spec.Description,
		Tags: spec.Tags, Deployments: deployments, Traffic: spec.Traffic, MirrorTraffic: spec.MirrorTraffic,
		Keys:      api.EndpointKeys{PrimaryKey: newKey(), SecondaryKey: newKey()},
		CreatedOn: e.clock.Now().UTC(),
	}
	id := api.EndpointID(workspace, spec.Name)
	e.mu.Lock()
	err = e.store.Update(func(tx *store.Tx) error {
		if _, err := getWorkspace(tx, workspace); err != nil {
			return err
		}
		if done, err := replayed(tx, idempotencyKey, id); done || err != nil {
			return err
		}
		if ok, err := tx.Get(store.Endpoints, rec.key(), &endpointRecord{}); err != nil {
			return err
		} else if ok {
			return api.Errorf(api.CodeConflict, "name", "online endpoint %q already exists in workspace %q; to manage it with Terraform, import it: terraform import mlcompute_online_endpoint.<name> %s", spec.Name, workspace, id)
		}
		// Scoring URIs are /{endpoint}/score on the engine's one scoring listener, so an
		// endpoint name is unique across workspaces, as it is within an Azure region.
		for _, k := range tx.Keys(store.Endpoints, "") {
			if nameOf(k) == spec.Name {
				return api.Errorf(api.CodeConflict, "name", "online endpoint name %q is taken by workspace %q; endpoint names are unique across the engine because they form the scoring URI", spec.Name, workspaceOf(k))
			}
		}
		if err := tx.Put(store.Endpoints, rec.key(), rec); err != nil {
			return err
		}
		return remember(tx, idempotencyKey, id)
	})
	e.mu.Unlock()
	if err != nil {
		return nil, err
	}
	e.log.Info("online endpoint created", "endpoint", rec.key(), "deployments", slices.Sorted(maps.Keys(rec.Deployments)))
	e.kickEndpoint(rec.key())
	return e.GetEndpoint(context.Background(), workspace, spec.Name)
}

// deploymentRecords validates snapshots, fills defaults and canonical sizes, and carries
// generations over from the previous deployments: a deployment whose processes must change
// gets the next generation, which rolls it out.
func (e *Engine) deploymentRecords(specs map[string]api.DeploymentSpec, prev map[string]deploymentRecord) (map[string]deploymentRecord, error) {
	out := make(map[string]deploymentRecord, len(specs))
	for _, name := range slices.Sorted(maps.Keys(specs)) {
		d := specs[name]
		size, err := validation.VMSize("deployments."+name+".instance_type", d.InstanceType, catalog.OnlineDeployment)
		if err != nil {
			return nil, err
		}
		d.InstanceType = size.Name
		if d.SnapshotID != "" && e.snapshots != nil {
			if _, err := e.snapshots.Path(d.SnapshotID); err != nil {
				return nil, api.Errorf(api.CodeInvalid, "deployments."+name+".snapshot_id", "code snapshot %q is not known to this engine; upload the code_path first", d.SnapshotID)
			}
		}
		validation.DefaultDeployment(&d)
		rec := deploymentRecord{Spec: d, Generation: 1}
		if old, ok := prev[name]; ok {
			rec.Generation, rec.Error = old.Generation, old.Error
			if needsRollout(old.Spec, d) {
				rec.Generation, rec.Error = old.Generation+1, ""
			}
		}
		out[name] = rec
	}
	return out, nil
}

// needsRollout reports whether a deployment's change needs new processes. Request settings
// and probes are applied by the engine and router to running instances; instance_count is
// met by adding or draining instances.
func needsRollout(old, cur api.DeploymentSpec) bool {
	return old.InstanceType != cur.InstanceType || old.SnapshotID != cur.SnapshotID ||
		!slices.Equal(old.Command, cur.Command) || !maps.Equal(old.EnvironmentVariables, cur.EnvironmentVariables)
}

// UpdateEndpoint replaces an endpoint's mutable fields. Changed deployments roll out:
// their new instances start and pass readiness before the old ones stop taking traffic,
// and a new split applies only once the deployments it sends to have rolled out.
func (e *Engine) UpdateEndpoint(_ context.Context, workspace, name string, upd api.EndpointUpdate) (*api.Endpoint, error) {
	if err := validation.EndpointUpdate(upd); err != nil {
		return nil, err
	}
	if upd.AuthMode == "" {
		upd.AuthMode = api.AuthModeKey
	}
	e.mu.Lock()
	err := e.store.Update(func(tx *store.Tx) error {
		rec, err := getEndpoint(tx, workspace, name)
		if err != nil {
			return err
		}
		if rec.Deleting {
			return api.Errorf(api.CodeConflict, "", "online endpoint %q is being deleted", name)
		}
		// A retiring deployment declared again continues from its generation.
		prev := maps.Clone(rec.Retiring)
		if prev == nil {
			prev = map[string]deploymentRecord{}
		}
		maps.Copy(prev, rec.Deployments)
		deployments, err := e.deploymentRecords(upd.Deployments, prev)
		if err != nil {
			return err
		}
		for name, d := range prev {
			if _, kept := deployments[name]; !kept && rec.LiveTraffic[name] > 0 {
				if rec.Retiring == nil {
					rec.Retiring = map[string]deploymentRecord{}
				}
				rec.Retiring[name] = d
			} else {
				delete(rec.Retiring, name)
			}
		}
		rec.AuthMode, rec.Description, rec.Tags = upd.AuthMode, upd.Description, upd.Tags
		rec.Deployments, rec.Traffic, rec.MirrorTraffic = deployments, upd.Traffic, upd.MirrorTraffic
		rec.moveTraffic()
		// Auth and request settings apply when the call returns, and so does the split
		// when the deployments it sends to are rolled out already; otherwise it moves once
		// they are. The router gets them before the commit, as in reconcileEndpoint.
		e.pushRouter(rec)
		return tx.Put(store.Endpoints, rec.key(), rec)
	})
	if err != nil {
		e.syncRouter(workspace + "/" + name)
	}
	e.mu.Unlock()
	if err != nil {
		return nil, err
	}
	e.log.Info("online endpoint updated", "endpoint", workspace+"/"+name)
	e.kickEndpoint(workspace + "/" + name)
	return e.GetEndpoint(context.Background(), workspace, name)
}

// GetEndpoint returns an endpoint with its deployments' instances.
func (e *Engine) GetEndpoint(_ context.Context, workspace, name string) (*api.Endpoint, error) {
	var out *api.Endpoint
	err := e.store.View(func(tx *store.Tx) error {
		rec, err := getEndpoint(tx, workspace, name)
		if err != nil {
			return err
		}
		ep := e.describeEndpoint(rec)
		out = &ep
		return nil
	})
	return out, err
}

// ListEndpoints returns a workspace's endpoints, sorted by name.
func (e *Engine) ListEndpoints(_ context.Context, workspace string) ([]api.Endpoint, error) {
	var out []api.Endpoint
	err := e.store.View(func(tx *store.Tx) error {
		if _, err := getWorkspace(tx, workspace); err != nil {
			return err
		}
		recs, err := store.List[endpointRecord](tx, store.Endpoints, workspace+"/")
		for _, rec := range recs {
			out = append(out, e.describeEndpoint(rec))
		}
		return err
	})
	slices.SortFunc(out, func(a, b api.Endpoint) int { return strings.Compare(a.Name, b.Name) })
	return out, err
}

// DeleteEndpoint stops taking requests for the endpoint, terminates every instance and
// deletes it. It returns once every instance is confirmed gone, or with an unavailable
// error when ctx ends first (the delete goes on, and resumes after an engine restart).
func (e *Engine) DeleteEndpoint(ctx context.Context, workspace, name string) error {
	key := workspace + "/" + name
	e.mu.Lock()
	err := e.store.Update(func(tx *store.Tx) error {
		rec, err := getEndpoint(tx, workspace, name)
		if err != nil || rec.Deleting {
			return err
		}
		rec.Deleting = true
		return tx.Put(store.Endpoints, key, rec)
	})
	e.mu.Unlock()
	if err != nil {
		return err
	}
	e.log.Info("online endpoint deleting", "endpoint", key)
	return e.waitEndpointsDeleted(ctx, []string{key})
}

// waitEndpointsDeleted kicks the endpoints and waits until their records are gone.
func (e *Engine) waitEndpointsDeleted(ctx context.Context, keys []string) error {
	chans := make([]chan struct{}, len(keys))
	e.waitMu.Lock()
	for i, k := range keys {
		chans[i] = make(chan struct{})
		e.waiters[runtime.EndpointKey(k)] = append(e.waiters[runtime.EndpointKey(k)], chans[i])
	}
	e.waitMu.Unlock()
	for _, k := range keys {
		e.kickEndpoint(k)
	}
	e.settleManual(ctx)
	for i, ch := range chans {
		if gone(ch) {
			continue
		}
		select {
		case <-ch:
		case <-e.waitDone(ctx):
			return api.Errorf(api.CodeUnavailable, "", "online endpoint %s is still stopping its instances; the delete goes on in the background, try again to wait for it", keys[i])
		}
	}
	return nil
}

// GetEndpointKeys returns an endpoint's keys.
func (e *Engine) GetEndpointKeys(_ context.Context, workspace, name string) (*api.EndpointKeys, error) {
	var keys api.EndpointKeys
	err := e.store.View(func(tx *store.Tx) error {
		rec, err := getEndpoint(tx, workspace, name)
		keys = rec.Keys
		return err
	})
	if err != nil {
		return nil, err
	}
	return &keys, nil
}

// RegenerateEndpointKeys replaces one key; the other keeps working, so clients can move
// to the new key without downtime.
func (e *Engine) RegenerateEndpointKeys(_ context.Context, workspace, name, keyType string) (*api.EndpointKeys, error) {
	if err := validation.KeyType(keyType); err != nil {
		return nil, err
	}
	var keys api.EndpointKeys
	e.mu.Lock()
	err := e.store.Update(func(tx *store.Tx) error {
		rec, err := getEndpoint(tx, workspace, name)
		if err != nil {
			return err
		}
		if keyType == api.KeyPrimary {
			rec.Keys.PrimaryKey = newKey()
		} else {
			rec.Keys.SecondaryKey = newKey()
		}
		keys = rec.Keys
		if !rec.Deleting {
			// The old key stops working when the call returns. The router gets the new one
			// before the commit, as in reconcileEndpoint.
			e.pushRouter(rec)
		}
		return tx.Put(store.Endpoints, rec.key(), rec)
	})
	if err != nil {
		e.syncRouter(workspace + "/" + name)
	}
	e.mu.Unlock()
	if err != nil {
		return nil, err
	}
	e.log.Info("online endpoint key regenerated", "endpoint", workspace+"/"+name, "key_type", keyType)
	e.kickEndpoint(workspace + "/" + name)
	return &keys, nil
}

func getEndpoint(tx *store.Tx, workspace, name string) (endpointRecord, error) {
	var rec endpointRecord
	ok, err := tx.Get(store.Endpoints, workspace+"/"+name, &rec)
	if err == nil && !ok {
		return rec, api.Errorf(api.CodeNotFound, "", "online endpoint %q not found in workspace %q", name, workspace)
	}
	return rec, err
}

// newKey is a 32-byte random key, base64url without padding (43 characters).
func newKey() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// describeEndpoint is an endpoint as the API shows it.
func (e *Engine) describeEndpoint(rec endpointRecord) api.Endpoint {
	out := api.Endpoint{
		ID: api.EndpointID(rec.Workspace, rec.Name), Workspace: rec.Workspace, Name: rec.Name,
		AuthMode: rec.AuthMode, Description: rec.Description, Tags: rec.Tags,
		Traffic: rec.Traffic, MirrorTraffic: rec.MirrorTraffic, LiveTraffic: rec.LiveTraffic, CreatedOn: rec.CreatedOn,
		Deployments: map[string]api.Deployment{},
	}
	if base := e.scoringBase(); base != "" {
		out.ScoringURI = base + router.ScoringPath(rec.Name)
	}
	var errs []string
	for _, name := range slices.Sorted(maps.Keys(rec.Deployments)) {
		d := rec.Deployments[name]
		ad := api.Deployment{DeploymentSpec: d.Spec, Generation: d.Generation, Instances: []api.EndpointInstance{}}
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
	case !rec.settled():
		out.ProvisioningState = api.ProvisioningUpdating
	default:
		out.ProvisioningState = api.ProvisioningSucceeded
	}
	return out
}

// settled reports whether every deployment has its instance_count of ready instances of
// its current generation, no older instance still takes traffic, and the declared split
// is the live one.
func (r endpointRecord) settled() bool {
	if len(r.Retiring) > 0 || !maps.Equal(r.LiveTraffic, r.Traffic) {
		return false
	}
	for name, d := range r.Deployments {
		var ready int64
		for _, in := range r.Instances {
			if in.Deployment != name || in.Terminating || in.State == api.EndpointInstanceDraining {
				continue
			}
			if in.Generation != d.Generation {
				return false
			}
			if in.State == api.EndpointInstanceReady {
				ready++
			}
		}
		if ready < d.Spec.InstanceCount {
			return false
		}
	}
	return true
}
