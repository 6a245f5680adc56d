package api

// QuotaCheck is the body of POST /v1/workspaces/{workspace}/quota:check: a planned compute
// or a planned endpoint's deployments, checked against the workspace's quota exactly as a
// create or an update of them would be, changing nothing. The answer is 204 when they fit,
// and otherwise the error the create or update would return (quota_exceeded, with the
// field of the input to change). Terraform's plan asks it before anything is applied.
type QuotaCheck struct {
	// Quotas, when not null, stands in for the workspace's stored quotas: a plan that
	// changes the quotas and a compute together is checked against the planned ones.
	Quotas map[string]int64 `json:"quotas"`
	// Compute is a planned compute cluster: its name, vm_size and max_node_count count.
	Compute *ComputeSpec `json:"compute,omitempty"`
	// Endpoint is a planned online endpoint: its name and each deployment's instance_type,
	// instance_count and scale_settings count. A deployment whose holding is the same as
	// the stored endpoint's is not checked again, as on update.
	Endpoint *EndpointSpec `json:"endpoint,omitempty"`
}
