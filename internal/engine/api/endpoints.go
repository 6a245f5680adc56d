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
}

// Request defaults.
const (
	DefaultRequestTimeoutMS                 = 5000
	MaxRequestTimeoutMS                     = 180000
	DefaultMaxConcurrentRequestsPerInstance = 1
)

// DeploymentSpec is one deployment of an online endpoint as a user declares it.
type DeploymentSpec struct {
	InstanceType  string `json:"instance_type"`
	InstanceCount int64  `json:"instance_count"`
	// CodePath is the directory the user named; it is kept to be read back.
	CodePath string `json:"code_path,omitempty"`
	// SnapshotID names the uploaded snapshot of CodePath (POST .../snapshots); instances
	// start in a copy of it. It is content-addressed, so a code change is a new ID.
	SnapshotID           string            `json:"snapshot_id,omitempty"`
	Command              []string          `json:"command"`
	EnvironmentVariables map[string]string `json:"environment_variables,omitempty"`
	// EnvironmentID, when set, is an environment of the endpoint's workspace
	// (/workspaces/{ws}/environments/{name}): instances prepare it on their node and run
	// the command with its interpreter first on PATH (DESIGN 8).
	EnvironmentID   string           `json:"environment_id,omitempty"`
	RequestSettings *RequestSettings `json:"request_settings,omitempty"`
	LivenessProbe   *Probe           `json:"liveness_probe,omitempty"`
	ReadinessProbe  *Probe           `json:"readiness_probe,omitempty"`
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
