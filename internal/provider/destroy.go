package provider

import (
	"context"
	"strings"
	"sync"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-log/tflog"
)

// This file keeps `terraform destroy` working whatever the configuration holds (DESIGN 10).
//
// Before a destroy, terraform runs a normal plan of the whole configuration to refresh the
// state (its "pre-destroy refresh"), and fails the destroy on any error of that plan. The
// provider's plan-time checks (quota, catalog, locations, the engine's policy, code paths)
// would stop it: after an apply the quota refused, the refused cluster is planned again
// and refused again, and the workspace stays. The plan requests of that refresh are those
// of a normal plan; nothing in the plugin protocol says that a destroy follows. What does
// say it is the command terraform runs: the provider is terraform's child process (the
// plugin handshake's cookie in its environment proves it), and terraform's command line
// and its TF_CLI_ARGS variables name the command. When that command is a destroy
// (`destroy`, or `plan`/`apply` with -destroy), the checks whose answer depends on the
// engine (quota, location, the idle minimum, the catalog: engineCheckSummaries) stand
// down: their errors in validation, plan and data source reads become warnings, which
// terraform does not show for the refresh, and the destroy plan itself (which plans only
// deletes) goes on. Every other error still shows: a destroy of a configuration that does
// not parse, or that names an attribute wrongly, fails as before. That the provider stood
// down is logged once, at Info. (hashicorp/terraform#33908 asks terraform to tell providers
// that a plan is a destroy's refresh; until it does, `terraform destroy -refresh=false`
// skips the refresh for a provider that cannot see the command, as design-decisions.md says.)
//
// A provider that is not terraform's child (the acceptance tests' in-process provider, a
// debugger's) cannot see the command and keeps every check.

// The summaries of the plan-time checks that depend on the engine, the ones a destroy sets
// aside; the checks add their diagnostics with these constants.
const (
	summaryQuotaExceeded = "Workspace Quota Exceeded"
	summaryLocation      = "Location Not Served"
	summaryIdleMinimum   = "Idle Time Below The Engine's Minimum"
	summaryVMSize        = "Invalid VM Size"
	summaryVMPriority    = "Invalid VM Priority"
	summaryInstanceType  = "Invalid Instance Type"
)

// engineCheckSummaries are the diagnostics that stand down during a destroy.
var engineCheckSummaries = map[string]bool{
	summaryQuotaExceeded: true, summaryLocation: true, summaryIdleMinimum: true,
	summaryVMSize: true, summaryVMPriority: true, summaryInstanceType: true,
	summaryJobFiles: true,
}

// pluginCookieEnv is set by terraform (go-plugin's handshake) in the environment of each
// provider process it starts.
const pluginCookieEnv = "TF_PLUGIN_MAGIC_COOKIE"

// servesDestroy reports whether this process serves a terraform destroy, from the
// environment (getenv) and the parent process's command line (parentArgs).
func servesDestroy(getenv func(string) string, parentArgs func() ([]string, error)) bool {
	if getenv(pluginCookieEnv) == "" {
		return false // not started by terraform: the command is not known
	}
	args, err := parentArgs()
	if err != nil || len(args) == 0 {
		return false
	}
	return destroyCommand(args[1:], getenv)
}

// destroyCommand reports whether terraform's (or OpenTofu's) arguments, without the program
// name, run a destroy: the `destroy` command, or `plan` or `apply` with -destroy on the
// command line or in TF_CLI_ARGS / TF_CLI_ARGS_<command>, which terraform adds to it.
func destroyCommand(args []string, getenv func(string) string) bool {
	command, i := "", 0
	for ; i < len(args); i++ {
		if !strings.HasPrefix(args[i], "-") { // global options (-chdir=DIR) come first
			command = args[i]
			break
		}
	}
	switch command {
	case "destroy":
		return true
	case "plan", "apply":
		all := append(append([]string{}, args[i+1:]...), strings.Fields(getenv("TF_CLI_ARGS"))...)
		all = append(all, strings.Fields(getenv("TF_CLI_ARGS_"+command))...)
		for _, a := range all {
			switch strings.TrimPrefix(a, "-") {
			case "-destroy", "destroy", "-destroy=true", "destroy=true":
				return true
			}
		}
	}
	return false
}

// destroyServer is the provider's protocol server while it serves a destroy: the
// engine-dependent checks that could fail the pre-destroy refresh report a warning instead
// of an error.
type destroyServer struct {
	tfprotov6.ProviderServer
	// logged makes the Info line once per process; nil logs nothing.
	logged *sync.Once
}

func newDestroyServer(s tfprotov6.ProviderServer) destroyServer {
	return destroyServer{ProviderServer: s, logged: &sync.Once{}}
}

func (s destroyServer) ValidateProviderConfig(ctx context.Context, req *tfprotov6.ValidateProviderConfigRequest) (*tfprotov6.ValidateProviderConfigResponse, error) {
	resp, err := s.ProviderServer.ValidateProviderConfig(ctx, req)
	if resp != nil {
		resp.Diagnostics = s.standDown(ctx, resp.Diagnostics)
	}
	return resp, err
}

func (s destroyServer) ValidateResourceConfig(ctx context.Context, req *tfprotov6.ValidateResourceConfigRequest) (*tfprotov6.ValidateResourceConfigResponse, error) {
	resp, err := s.ProviderServer.ValidateResourceConfig(ctx, req)
	if resp != nil {
		resp.Diagnostics = s.standDown(ctx, resp.Diagnostics)
	}
	return resp, err
}

func (s destroyServer) ValidateDataResourceConfig(ctx context.Context, req *tfprotov6.ValidateDataResourceConfigRequest) (*tfprotov6.ValidateDataResourceConfigResponse, error) {
	resp, err := s.ProviderServer.ValidateDataResourceConfig(ctx, req)
	if resp != nil {
		resp.Diagnostics = s.standDown(ctx, resp.Diagnostics)
	}
	return resp, err
}

// PlanResourceChange keeps the plan the framework made; when it made none, the proposed
// state stands for it (the refresh's plan is thrown away once the state is refreshed).
func (s destroyServer) PlanResourceChange(ctx context.Context, req *tfprotov6.PlanResourceChangeRequest) (*tfprotov6.PlanResourceChangeResponse, error) {
	resp, err := s.ProviderServer.PlanResourceChange(ctx, req)
	if err != nil || resp == nil || !hasError(resp.Diagnostics) {
		return resp, err
	}
	resp.Diagnostics = s.standDown(ctx, resp.Diagnostics)
	if hasError(resp.Diagnostics) {
		return resp, nil // another error: it shows
	}
	if resp.PlannedState == nil {
		resp.PlannedState = req.ProposedNewState
	}
	return resp, nil
}

// ReadDataSource answers a look-up that failed with its configuration, whose computed
// attributes are null.
func (s destroyServer) ReadDataSource(ctx context.Context, req *tfprotov6.ReadDataSourceRequest) (*tfprotov6.ReadDataSourceResponse, error) {
	resp, err := s.ProviderServer.ReadDataSource(ctx, req)
	if err != nil || resp == nil || !hasError(resp.Diagnostics) {
		return resp, err
	}
	resp.Diagnostics = s.standDown(ctx, resp.Diagnostics)
	if hasError(resp.Diagnostics) {
		return resp, nil // another error: it shows
	}
	resp.State = req.Config
	return resp, nil
}

func hasError(diags []*tfprotov6.Diagnostic) bool {
	for _, d := range diags {
		if d != nil && d.Severity == tfprotov6.DiagnosticSeverityError {
			return true
		}
	}
	return false
}

// standDown turns the errors of the engine-dependent checks into warnings, and logs once
// that it did.
func (s destroyServer) standDown(ctx context.Context, diags []*tfprotov6.Diagnostic) []*tfprotov6.Diagnostic {
	for _, d := range diags {
		if d != nil && d.Severity == tfprotov6.DiagnosticSeverityError && engineCheckSummaries[d.Summary] {
			if s.logged != nil {
				s.logged.Do(func() {
					tflog.Info(ctx, "the engine-dependent plan-time checks (quota, location, idle minimum, catalog) stand down for this destroy",
						map[string]any{"first": d.Summary})
				})
			}
			d.Severity = tfprotov6.DiagnosticSeverityWarning
		}
	}
	return diags
}
