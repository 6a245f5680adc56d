package api

import "time"

// Auth modes of an online endpoint.
const (
	AuthModeKey      = "key"
	AuthModeAMLToken = "aml_token"
)

// Provisioning states of an online endpoint. An endpoint is Creating until every
// deployment's instances passed their readiness probe once, Updating while a changed
// deployment rolls out, Failed when a deployment cannot become ready (Error says why), and
// Succeeded otherwise.
const (
	ProvisioningCreating  = "Creating"
	ProvisioningUpdating  = "Updating"
	ProvisioningSucceeded = "Succeeded"
	ProvisioningFailed    = "Failed"
	ProvisioningDeleting  = "Deleting"
)

// Instance states of a deployment.
const (
	EndpointInstanceStarting = "Starting" // process started, readiness not yet passed
	EndpointInstanceReady    = "Ready"    // receiving traffic
	EndpointInstanceDraining = "Draining" // replaced by a rollout, finishing its requests
	EndpointInstanceFailed   = "Failed"   // liveness failed or the process exited; being restarted
)

// Probe settings, as Azure's online deployments name them. Durations are ISO 8601.
type Probe struct {
	Path             string `json:"path"`
	InitialDelay     string `json:"initial_delay"`
	Period           string `json:"period"`
	Timeout          string `json:"timeout"`
	SuccessThreshold int64  `json:"success_threshold"`
	FailureThreshold int64  `json:"failure_threshold"`
}

// Probe defaults (DESIGN 3, mlcompute_online_endpoint).
const (
	DefaultProbePath             = "/"
	DefaultProbeInitialDelay     = "PT10S"
	DefaultProbePeriod           = "PT10S"
	DefaultProbeTimeout          = "PT2S"
	DefaultProbeSuccessThreshold = 1
	DefaultProbeFailureThreshold = 30
)

// RequestSettings bound the requests the router sends to one deployment.
type RequestSettings struct {
	// RequestTimeoutMS is 1..180000; a request past it is cancelled upstream.
	RequestTimeoutMS int64 `json:"request_timeout_ms"`
	// MaxConcurrentRequestsPerInstance is >= 1; a request finding every instance full gets 429.
	MaxConcurrentRequestsPerInstance int64 `json:"max_concurrent_requests_per_instance"`
	// MaxQueueWaitMS is how long a request may wait for a free instance before it gets 429;
	// for a deployment that can scale to zero it also bounds the wait for the first
	// instance. 0 means the default (DefaultMaxQueueWaitMS, or DefaultMaxQueueWaitFromZeroMS
	// when min_instances is 0).
	MaxQueueWaitMS int64 `json:"max_queue_wait_ms,omitempty"`
}

// Request defaults.
const (
	DefaultRequestTimeoutMS                 = 5000
	MaxRequestTimeoutMS                     = 180000
	DefaultMaxConcurrentRequestsPerInstance = 1
	// DefaultMaxQueueWaitMS is Azure's default; DefaultMaxQueueWaitFromZeroMS is the default
	// of a deployment that can scale to zero, whose first request waits for an instance to
	// start (DESIGN 3).
	DefaultMaxQueueWaitMS         = 500
	DefaultMaxQueueWaitFromZeroMS = 60000
	// MaxMaxQueueWaitMS bounds max_queue_wait_ms: ten minutes, longer than any start.
	MaxMaxQueueWaitMS = 600000
)

// Scale types of a deployment (scale_settings.type).
const (
	ScaleTypeDefault           = "default"
	ScaleTypeTargetUtilization = "target_utilization"
)

// Scale defaults (DESIGN 3). min_instances and max_instances default to Azure's 1.
const (
	DefaultMinInstances                = 1
	DefaultMaxInstances                = 1
	DefaultTargetUtilizationPercentage = 70
	DefaultEndpointPollingInterval     = "PT1S"
	DefaultEndpointScaleDownDelay      = "PT5M"
)

// EndpointScaleSettings is a deployment's scale_settings. Type default keeps
// instance_count instances; target_utilization scales between MinInstances and
// MaxInstances from the router's counts (DESIGN 4, package rules/autoscale). Durations are
// ISO 8601; an empty ScaleToZeroDelay means ScaleDownDelay.
type EndpointScaleSettings struct {
	Type                        string `json:"type"`
	MinInstances                int64  `json:"min_instances"`
	MaxInstances                int64  `json:"max_instances"`
	TargetUtilizationPercentage int64  `json:"target_utilization_percentage"`
	PollingInterval             string `json:"polling_interval"`
	ScaleDownDelay              string `json:"scale_down_delay"`
	ScaleToZeroDelay            string `json:"scale_to_zero_delay,omitempty"`
}

// Autoscaled reports whether s scales with load.
func (s *EndpointScaleSettings) Autoscaled() bool {
	return s != nil && s.Type == ScaleTypeTargetUtilization
}

// ScaleDecision is one decision of a deployment's autoscaler, with what it was made from.
type ScaleDecision struct {
	Time   time.Time `json:"time"`
	From   int64     `json:"from"`
	To     int64     `json:"to"`
	Reason string    `json:"reason"`
	// Load is the requests in flight sampled; AverageLoad the short window's average.
	Load        int64   `json:"load"`
	AverageLoad float64 `json:"average_load"`
	// PeakNeed is the highest need over the last scale_down_delay.
	PeakNeed int64 `json:"peak_need"`
}

// MaxScaleDecisions is how many decisions a deployment's status keeps.
const MaxScaleDecisions = 20

// DeploymentSpec is one deployment of an online endpoint as a user declares it.
type DeploymentSpec struct {
	InstanceType  string `json:"instance_type"`
	InstanceCount int64  `json:"instance_count"`
	// CodePath is the directory the user named; it is kept to be read back.
	CodePath string `json:"code_path,omitempty"`
	// SnapshotID names the uploaded snapshot of CodePath (POST .../snapshots); instances
	// start in a copy of it. It is content-addressed, so a code change is a new ID.
	SnapshotID string `json:"snapshot_id,omitempty"`
	// ModelPath is the model the user named, kept to be read back: a local directory
	// (uploaded as ModelSnapshotID) or a registered job output,
	// azureml://jobs/<job>/outputs/<output>, which the engine resolves to ModelDigest.
	ModelPath string `json:"model_path,omitempty"`
	// ModelDigest is the manifest digest of the job output ModelPath names, set by the
	// engine; a new one rolls the deployment out.
	ModelDigest string `json:"model_digest,omitempty"`
	// ModelSnapshotID names the uploaded snapshot of ModelPath; each instance finds a copy
	// of it in the directory named by AZUREML_MODEL_DIR. It is content-addressed, so a
	// model change is a new ID, which rolls the deployment out.
	ModelSnapshotID      string            `json:"model_snapshot_id,omitempty"`
	Command              []string          `json:"command"`
	EnvironmentVariables map[string]string `json:"environment_variables,omitempty"`
	// EnvironmentID, when set, is an environment of the endpoint's workspace
	// (/workspaces/{ws}/environments/{name}): instances prepare it on their node and run
	// the command with its interpreter first on PATH (DESIGN 8).
	EnvironmentID   string                 `json:"environment_id,omitempty"`
	RequestSettings *RequestSettings       `json:"request_settings,omitempty"`
	ScaleSettings   *EndpointScaleSettings `json:"scale_settings,omitempty"`
	LivenessProbe   *Probe                 `json:"liveness_probe,omitempty"`
	ReadinessProbe  *Probe                 `json:"readiness_probe,omitempty"`
}

// EndpointSpec is what a user declares for an online endpoint.
type EndpointSpec struct {
	Name        string                    `json:"name"`
	AuthMode    string                    `json:"auth_mode,omitempty"`
	Description string                    `json:"description,omitempty"`
	Tags        map[string]string         `json:"tags,omitempty"`
	Deployments map[string]DeploymentSpec `json:"deployments"`
	// Traffic maps deployment to percent; the values sum to 0 or 100.
	Traffic map[string]int64 `json:"traffic,omitempty"`
	// MirrorTraffic maps at most one deployment, without live traffic, to at most 50.
	MirrorTraffic map[string]int64 `json:"mirror_traffic,omitempty"`
}

// EndpointUpdate replaces an endpoint's mutable fields: everything but its name.
type EndpointUpdate struct {
	AuthMode      string                    `json:"auth_mode,omitempty"`
	Description   string                    `json:"description,omitempty"`
	Tags          map[string]string         `json:"tags,omitempty"`
	Deployments   map[string]DeploymentSpec `json:"deployments"`
	Traffic       map[string]int64          `json:"traffic,omitempty"`
	MirrorTraffic map[string]int64          `json:"mirror_traffic,omitempty"`
}

// EndpointInstance is one running instance of a deployment.
type EndpointInstance struct {
	ID    string `json:"id"`
	State string `json:"state"`
	// Generation counts the deployment's rollouts; instances of an older generation drain.
	Generation int64     `json:"generation"`
	Restarts   int64     `json:"restarts"`
	StartedAt  time.Time `json:"started_at"`
}

// Deployment is a deployment as the engine holds it, with its instances.
type Deployment struct {
	DeploymentSpec
	// Generation counts rollouts: it grows whenever the spec changes in a way that needs
	// new instances (everything but request_settings and probes' thresholds).
	Generation int64              `json:"generation"`
	Instances  []EndpointInstance `json:"instances"`
	// ReadyInstances counts instances of the current generation that receive traffic.
	ReadyInstances int64 `json:"ready_instances"`
	// DesiredInstances is the count the deployment is kept at: instance_count, or the
	// autoscaler's latest decision.
	DesiredInstances int64 `json:"desired_instances"`
	// RequestsInFlight and HeldRequests are the router's counts now; held requests wait for
	// an instance (from zero).
	RequestsInFlight int64 `json:"requests_in_flight"`
	HeldRequests     int64 `json:"held_requests"`
	// ScaleDecisions are the autoscaler's latest decisions that changed the count, oldest
	// first, at most MaxScaleDecisions.
	ScaleDecisions []ScaleDecision `json:"scale_decisions,omitempty"`
}

// Endpoint is an online endpoint as the engine holds it.
type Endpoint struct {
	ID            string                `json:"id"`
	Workspace     string                `json:"workspace"`
	Name          string                `json:"name"`
	AuthMode      string                `json:"auth_mode"`
	Description   string                `json:"description,omitempty"`
	Tags          map[string]string     `json:"tags,omitempty"`
	Deployments   map[string]Deployment `json:"deployments"`
	Traffic       map[string]int64      `json:"traffic,omitempty"`
	MirrorTraffic map[string]int64      `json:"mirror_traffic,omitempty"`
	// LiveTraffic is the split the router applies now: Traffic once the deployments it
	// sends to have rolled out, the previous split until then.
	LiveTraffic       map[string]int64 `json:"live_traffic,omitempty"`
	ScoringURI        string           `json:"scoring_uri"`
	ProvisioningState string           `json:"provisioning_state"`
	// Error explains a Failed endpoint: the deployment and what its instances did.
	Error     string    `json:"error,omitempty"`
	CreatedOn time.Time `json:"created_on"`
}

// EndpointList is the body of GET /v1/workspaces/{ws}/onlineEndpoints.
type EndpointList struct {
	Endpoints []Endpoint `json:"endpoints"`
}

// EndpointKeys are an endpoint's keys (key mode). They are served only by their own
// route, never inside Endpoint, so listing endpoints never prints a secret.
type EndpointKeys struct {
	PrimaryKey   string `json:"primary_key"`
	SecondaryKey string `json:"secondary_key"`
}

// Key names for regeneration.
const (
	KeyPrimary   = "primary"
	KeySecondary = "secondary"
)

// RegenerateKeysRequest is the body of POST .../regenerateKeys.
type RegenerateKeysRequest struct {
	// KeyType is "primary" or "secondary".
	KeyType string `json:"key_type"`
}

// EndpointToken is an AML token for an aml_token endpoint.
type EndpointToken struct {
	AccessToken string    `json:"access_token"`
	ExpiresOn   time.Time `json:"expires_on"`
}

// EndpointID is the ID of an online endpoint.
func EndpointID(workspace, name string) string {
	return ID{Workspace: workspace, Collection: CollectionOnlineEndpoints, Name: name}.String()
}
