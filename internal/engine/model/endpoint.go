package model

import (
	"strings"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

// Endpoint is an online endpoint as stored, keyed "<workspace>/<name>". Its instances
// are stored in it, so an engine that restarts adopts them (their nodes are known) rather
// than releasing them as orphans.
type Endpoint struct {
	Workspace     string                `json:"workspace"`
	Name          string                `json:"name"`
	AuthMode      string                `json:"auth_mode"`
	Description   string                `json:"description,omitempty"`
	Tags          map[string]string     `json:"tags,omitempty"`
	Deployments   map[string]Deployment `json:"deployments"`
	Traffic       map[string]int64      `json:"traffic,omitempty"`
	MirrorTraffic map[string]int64      `json:"mirror_traffic,omitempty"`
	// LiveTraffic is the split the router applies. It becomes Traffic once every deployment
	// Traffic sends requests to has rolled out; until then the previous split stays, so an
	// apply that adds green and gives it all traffic never routes to a green with nothing
	// ready yet.
	LiveTraffic map[string]int64 `json:"live_traffic,omitempty"`
	// Retiring holds removed deployments that LiveTraffic still sends requests to: their
	// instances serve until the split moves, then drain.
	Retiring  map[string]Deployment `json:"retiring,omitempty"`
	Keys      api.EndpointKeys      `json:"keys"`
	CreatedOn time.Time             `json:"created_on"`
	// Provisioned is set once every deployment had all its instances ready: Creating ends.
	Provisioned bool `json:"provisioned,omitempty"`
	// Deleting is committed before any instance is terminated, so a crash mid-delete
	// resumes the delete.
	Deleting  bool               `json:"deleting,omitempty"`
	Instances []EndpointInstance `json:"instances,omitempty"`
}

// Deployment is one deployment: its spec with defaults filled and the size in the
// catalog's spelling, and its generation.
type Deployment struct {
	Spec       api.DeploymentSpec `json:"spec"`
	Generation int64              `json:"generation"`
	// Error says why the deployment cannot become ready; cleared once an instance of it is.
	Error string `json:"error,omitempty"`
	// Env is the deployment's environment as it was resolved for this generation: an
	// environment update (a new content hash) makes a new generation, which rolls out.
	Env *JobEnvironment `json:"env,omitempty"`
	// Desired is the autoscaler's committed instance count (scale_settings.type =
	// target_utilization); unused otherwise.
	Desired int64 `json:"desired,omitempty"`
	// Decisions are the autoscaler's latest decisions that changed the count, oldest first,
	// at most api.MaxScaleDecisions.
	Decisions []api.ScaleDecision `json:"decisions,omitempty"`
	// StartError is why the deployment's last instance start failed while none was ready;
	// the router answers the requests it holds with it. Cleared when an instance is ready
	// or the autoscaler starts again from zero.
	StartError string `json:"start_error,omitempty"`
	// Durations are the spec's durations, parsed once where the deployment comes in
	// (ParseDurations at create and update); nil in a record stored before they were.
	Durations *DeploymentDurations `json:"durations,omitempty"`
}

// DeploymentDurations are a deployment's probe and scale durations, parsed.
type DeploymentDurations struct {
	Readiness validation.ProbeTimes `json:"readiness"`
	Liveness  validation.ProbeTimes `json:"liveness"`
	Scale     validation.ScaleTimes `json:"scale"`
}

// ParseDurations fills Durations from the spec, which was validated on the way in.
func (d *Deployment) ParseDurations() {
	t := parseDurations(d.Spec)
	d.Durations = &t
}

// Times are the deployment's durations: as parsed at write time, or parsed now for a
// record stored before they were.
func (d Deployment) Times() DeploymentDurations {
	if d.Durations != nil {
		return *d.Durations
	}
	return parseDurations(d.Spec)
}

func parseDurations(s api.DeploymentSpec) DeploymentDurations {
	probe := func(p *api.Probe) validation.ProbeTimes {
		if p == nil {
			p = &api.Probe{}
		}
		return validation.ParseProbe(*p)
	}
	return DeploymentDurations{Readiness: probe(s.ReadinessProbe), Liveness: probe(s.LivenessProbe), Scale: validation.ParseScale(s.ScaleSettings)}
}

// Target is the number of instances of the current generation the deployment is kept at:
// instance_count, or the autoscaler's committed count.
func (d Deployment) Target() int64 {
	if d.Spec.ScaleSettings.Autoscaled() {
		return d.Desired
	}
	return d.Spec.InstanceCount
}

// EndpointInstance is one instance: a node of the engine's driver running the deployment's
// command as a task.
type EndpointInstance struct {
	// ID is also the node's driver key, chosen and committed before the driver is called.
	ID         string `json:"id"`
	Deployment string `json:"deployment"`
	Generation int64  `json:"generation"`
	Host       string `json:"host,omitempty"`
	// Port is passed as PORT: asked of the instance's node (driver TaskPort) once it is
	// ready, committed before the first start, and kept across restarts; 0 until then.
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
	Process Process `json:"process"`
}

// Process is the part of a deployment that makes an instance's process.
type Process struct {
	InstanceType         string            `json:"instance_type"`
	Command              []string          `json:"command"`
	EnvironmentVariables map[string]string `json:"environment_variables,omitempty"`
	SnapshotID           string            `json:"snapshot_id,omitempty"`
	// ModelSnapshotID is the deployment's model, copied to the task's model directory.
	ModelSnapshotID string `json:"model_snapshot_id,omitempty"`
	// ModelDigest is the deployment's model when it is a job's output (artifacts store).
	ModelDigest string `json:"model_digest,omitempty"`
	// Env is the environment the process runs in, nil for none.
	Env *JobEnvironment `json:"env,omitempty"`
}

// ProcessOf is the process of a deployment's current generation.
func ProcessOf(d Deployment) Process {
	s := d.Spec
	return Process{InstanceType: s.InstanceType, Command: s.Command, EnvironmentVariables: s.EnvironmentVariables, SnapshotID: s.SnapshotID, ModelSnapshotID: s.ModelSnapshotID, ModelDigest: s.ModelDigest, Env: d.Env}
}

func (r Endpoint) Key() string { return r.Workspace + "/" + r.Name }

// Deployment returns a deployment by name, a retiring one included.
func (r Endpoint) Deployment(name string) (Deployment, bool) {
	if d, ok := r.Deployments[name]; ok {
		return d, true
	}
	d, ok := r.Retiring[name]
	return d, ok
}

func GetEndpoint(tx *store.Tx, workspace, name string) (Endpoint, error) {
	var rec Endpoint
	ok, err := tx.Get(store.Endpoints, workspace+"/"+name, &rec)
	if err == nil && !ok {
		return rec, api.Errorf(api.CodeNotFound, "", "online endpoint %q not found in workspace %q", name, workspace)
	}
	return rec, err
}

func NameOf(key string) string {
	_, name, _ := strings.Cut(key, "/")
	return name
}

// ModelDigests are the manifests of the artifacts store the endpoint keeps from
// collection: its deployments' (retiring ones included) and its instances' models.
func (e Endpoint) ModelDigests() []string {
	var out []string
	for _, deps := range []map[string]Deployment{e.Deployments, e.Retiring} {
		for _, d := range deps {
			if d.Spec.ModelDigest != "" {
				out = append(out, d.Spec.ModelDigest)
			}
		}
	}
	for _, in := range e.Instances {
		if in.Process.ModelDigest != "" {
			out = append(out, in.Process.ModelDigest)
		}
	}
	return out
}
