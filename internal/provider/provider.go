// Package provider is the Terraform provider for the mlcompute engine, built on
// terraform-plugin-framework. It maps schemas to the engine's typed client and engine
// errors to diagnostics; every domain rule lives in the engine (internal/engine), and
// plan-time checks call the engine's own validation functions.
package provider

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/daemon"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/tlsconfig"
)

// Environment variables the provider reads when its configuration leaves a value out.
// The mlcompute CLI reads the same ones.
const (
	envEndpoint = "MLCOMPUTE_ENDPOINT"
	envToken    = "MLCOMPUTE_TOKEN"
	envCACert   = "MLCOMPUTE_CA_CERT"
	envHome     = "MLCOMPUTE_HOME"
)

// How long the provider waits for an engine that cannot be reached. An operation with a
// `timeouts` value (create, update, delete) waits until that timeout: the embedded engine
// is started again, and a configured endpoint is retried with back-off. Calls without one
// (refresh, data sources) wait readUnreachableWait, and the check in Configure
// configureUnreachableWait.
const (
	readUnreachableWait      = 2 * time.Minute
	configureUnreachableWait = 10 * time.Second
)

var (
	_ provider.Provider                   = (*mlcomputeProvider)(nil)
	_ provider.ProviderWithValidateConfig = (*mlcomputeProvider)(nil)
)

// New returns a constructor of the provider, as providerserver.Serve and the acceptance
// tests' provider factories want it.
func New(version string) func() provider.Provider {
	return func() provider.Provider {
		return &mlcomputeProvider{version: version}
	}
}

// mlcomputeProvider is the mlcompute provider.
type mlcomputeProvider struct {
	// version is "dev" for local builds, the release version otherwise and "test" in
	// acceptance tests.
	version string
	// client is the engine client once Configure has made one, for the protocol fast path
	// (protocol.go), which answers some calls without the framework.
	client engineClient
}

// engine returns the configured engine client, or nil before Configure.
func (p *mlcomputeProvider) engine() *client.Client { return p.client.Load() }

func (p *mlcomputeProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "mlcompute"
	resp.Version = p.version
}

func (p *mlcomputeProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "The `mlcompute` provider declares compute targets for machine learning (workspaces, " +
			"compute clusters and instances, attached machines and online endpoints) and makes them real on the " +
			"mlcompute engine. Without an `endpoint` it uses an engine embedded in the provider binary, which it " +
			"starts on the local machine when none is running.",
		Attributes: map[string]schema.Attribute{
			"endpoint": schema.StringAttribute{
				MarkdownDescription: "The address of a running engine: `unix:///path/to/engine.sock` or " +
					"`https://host:port` (`http://` only for an engine on loopback without `--tls`, or one serving " +
					"`--insecure-http`). When neither this nor the `MLCOMPUTE_ENDPOINT` environment variable is " +
					"set, the provider uses the embedded engine of `data_dir`, starting it if needed; on Windows, " +
					"where the embedded engine does not run, set it.",
				Optional: true,
			},
			"token": schema.StringAttribute{
				MarkdownDescription: "The engine's API token, sent as a bearer token on every call. It may also be " +
					"set with the `MLCOMPUTE_TOKEN` environment variable. It is required when `endpoint` is an " +
					"`http` or `https` address, loopback included (a TCP port is open to every local user). For an engine " +
					"on this machine started with `mlcompute serve --listen tcp://...` and no `--token-file`, the provider " +
					"reads the token the engine wrote to `api.token` in `data_dir`. A token made with `mlcompute token create` " +
					"acts with its role (`reader`, `contributor` or `operator`) on its workspaces only.",
				Optional:  true,
				Sensitive: true,
			},
			"ca_certificate": schema.StringAttribute{
				MarkdownDescription: "The PEM of the CA the engine's TLS certificate must chain to, for an `https` " +
					"`endpoint`. It may also be set with the `MLCOMPUTE_CA_CERT` environment variable (the PEM, or the " +
					"path of a PEM file). When neither is set, the provider trusts the CA `mlcompute login` stored for " +
					"the endpoint in `data_dir`, else for an engine on loopback the CA it made in `data_dir` (`ca.pem`), " +
					"else the system's roots. A certificate that does not chain to it fails with an error naming the " +
					"SHA-256 fingerprint of the CA the engine presented.",
				Optional: true,
			},
			"data_dir": schema.StringAttribute{
				MarkdownDescription: "The embedded engine's directory: its state, socket (`engine.sock`), node " +
					"directories and log (`engine.log`). It may also be set with the `MLCOMPUTE_HOME` environment " +
					"variable (default: `$XDG_DATA_HOME/mlcompute`, else `~/.local/share/mlcompute`). When " +
					"`endpoint` is set, only the API token an engine on this machine wrote there (`api.token`) is read from it.",
				Optional: true,
			},
		},
	}
}

// ValidateConfig reports the unknown keys of object values written in the configuration's
// text, which terraform drops without a word (object_keys.go), in resources whose name is
// not a literal; a resource's own plan reports the others. Terraform runs the provider in
// its working directory, the root module's.
func (p *mlcomputeProvider) ValidateConfig(ctx context.Context, _ provider.ValidateConfigRequest, resp *provider.ValidateConfigResponse) {
	reportUnmatchedObjectKeys(ctx, p.Resources(ctx), &resp.Diagnostics)
}

// providerModel is the provider's configuration.
type providerModel struct {
	Endpoint types.String `tfsdk:"endpoint"`
	Token    types.String `tfsdk:"token"`
	CACert   types.String `tfsdk:"ca_certificate"`
	DataDir  types.String `tfsdk:"data_dir"`
}

func (p *mlcomputeProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var cfg providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	for name, v := range map[string]types.String{"endpoint": cfg.Endpoint, "token": cfg.Token, "ca_certificate": cfg.CACert, "data_dir": cfg.DataDir} {
		if v.IsUnknown() {
			resp.Diagnostics.AddAttributeError(path.Root(name), "Unknown Provider Configuration Value",
				fmt.Sprintf("The provider's %s depends on a value that is not known until apply, but the provider "+
					"needs it to plan.\n\nSet %s to a value known at plan time (a literal, a variable or an "+
					"environment variable), or apply the resources it depends on first with -target.", name, name))
		}
	}
	if resp.Diagnostics.HasError() {
		return
	}

	endpoint := valueOrEnv(cfg.Endpoint, envEndpoint)
	token := valueOrEnv(cfg.Token, envToken)
	if token != "" {
		ctx = tflog.MaskAllFieldValuesStrings(ctx, token)
	}
	var c *client.Client
	if endpoint != "" {
		if token == "" {
			token = p.localToken(endpoint, cfg.DataDir.ValueString(), resp)
			if resp.Diagnostics.HasError() {
				return
			}
			if token != "" {
				ctx = tflog.MaskAllFieldValuesStrings(ctx, token)
			}
		}
		c = p.connectEndpoint(ctx, endpoint, token, valueOrEnv(cfg.CACert, envCACert), cfg.DataDir.ValueString(), resp)
	} else {
		c = p.connectEmbedded(ctx, cfg.DataDir.ValueString(), resp)
	}
	if c == nil {
		return
	}
	data := &providerData{client: c, quotas: &quotaPlans{}}
	resp.ResourceData = data
	resp.DataSourceData = data
	p.client.Store(c)
}

// connectEndpoint returns a client of an engine the user runs, after checking that it
// answers and accepts the token; it returns nil after adding an error.
func (p *mlcomputeProvider) connectEndpoint(ctx context.Context, endpoint, token, caCert, dataDir string, resp *provider.ConfigureResponse) *client.Client {
	if attr, summary, detail := checkEndpoint(endpoint, token); summary != "" {
		resp.Diagnostics.AddAttributeError(path.Root(attr), summary, detail)
		return nil
	}
	caPEM, err := readCACert(caCert)
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("ca_certificate"), "Invalid CA Certificate",
			fmt.Sprintf("The provider cannot use ca_certificate (or %s).\n\nSet it to the PEM of the engine's CA "+
				"(the ca.pem in the engine's data dir) or the path of a file holding it.\n\nOriginal error: %s", envCACert, err))
		return nil
	}
	if dataDir == "" {
		dataDir, _ = daemon.DefaultDataDir()
	}
	c, err := daemon.Connect(ctx, daemon.ConnectOptions{Endpoint: endpoint, Token: token, CACert: caPEM, DataDir: dataDir, ClientOptions: clientOptions()})
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("endpoint"), "Invalid Engine Endpoint",
			fmt.Sprintf("The provider cannot use the endpoint %q.\n\nSet endpoint (or %s) to unix:///path/to/engine.sock "+
				"or http(s)://host:port.\n\nOriginal error: %s", endpoint, envEndpoint, err))
		return nil
	}
	statusCtx, cancel := context.WithTimeout(ctx, configureUnreachableWait)
	defer cancel()
	st, err := c.Status(statusCtx)
	switch {
	case api.IsUnauthorized(err):
		resp.Diagnostics.AddAttributeError(path.Root("token"), "Engine Rejected Token",
			fmt.Sprintf("The engine at %s refused the provider's token.\n\nSet token (or %s) to the token the engine "+
				"was started with ('mlcompute serve --token-file') or to one made with 'mlcompute token create'; an expired "+
				"or revoked token must be replaced.\n\nOriginal error: %s", endpoint, envToken, err))
		return nil
	case errors.Is(err, tlsconfig.ErrUntrusted):
		resp.Diagnostics.AddAttributeError(path.Root("ca_certificate"), "Engine Certificate Not Trusted",
			fmt.Sprintf("The engine at %s presented a TLS certificate that does not chain to the CA the provider "+
				"trusts.\n\nCompare the fingerprint below with the one 'mlcompute serve' printed, then set "+
				"ca_certificate (or %s) to the engine's CA, or run 'mlcompute login --endpoint %s'.\n\nOriginal error: %s",
				endpoint, envCACert, endpoint, err))
		return nil
	case err != nil:
		resp.Diagnostics.AddAttributeError(path.Root("endpoint"), "Cannot Reach Engine",
			fmt.Sprintf("No engine answered at %s.\n\nStart one with 'mlcompute serve', check the address, or remove "+
				"endpoint (and %s) to use the embedded engine.\n\nOriginal error: %s", endpoint, envEndpoint, err))
		return nil
	}
	tflog.Info(ctx, "connected to engine", map[string]any{"endpoint": endpoint, "engine_version": st.Version, "locations": st.Locations})
	return c
}

// localToken returns the token an engine on this machine made for its loopback TCP
// listener ('mlcompute serve --listen tcp://...' without --token-file writes it to
// <data_dir>/api.token), or "" when endpoint is not loopback TCP or there is none. A token
// file others can read is refused with an error on token.
func (p *mlcomputeProvider) localToken(endpoint, dataDir string, resp *provider.ConfigureResponse) string {
	if dataDir == "" {
		var err error
		if dataDir, err = daemon.DefaultDataDir(); err != nil {
			return ""
		}
	}
	token, err := daemon.EndpointToken(endpoint, "", dataDir)
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("token"), "Cannot Use Engine Token File",
			fmt.Sprintf("The provider has no token for %s and looked for the one the engine keeps in its data dir, "+
				"but could not use it.\n\nFix the file as the error says, or set token (or %s).\n\nOriginal error: %s",
				endpoint, envToken, err))
		return ""
	}
	return token
}

// connectEmbedded returns a client of the embedded engine of dataDir (or the default data
// dir), starting the engine from this binary when none answers; it returns nil after
// adding an error.
func (p *mlcomputeProvider) connectEmbedded(ctx context.Context, dataDir string, resp *provider.ConfigureResponse) *client.Client {
	if dataDir == "" {
		var err error
		if dataDir, err = daemon.DefaultDataDir(); err != nil {
			resp.Diagnostics.AddAttributeError(path.Root("data_dir"), "Cannot Find Engine Data Directory",
				fmt.Sprintf("The provider could not work out where the embedded engine keeps its data.\n\nSet data_dir "+
					"(or %s) to a directory the provider may create and write.\n\nOriginal error: %s", envHome, err))
			return nil
		}
	}
	exe, err := os.Executable()
	if err != nil {
		resp.Diagnostics.AddError("Cannot Start Embedded Engine",
			fmt.Sprintf("The provider could not find its own binary, which it runs to start the embedded engine.\n\n"+
				"Run an engine yourself with 'mlcompute serve' and set endpoint to it.\n\nOriginal error: %s", err))
		return nil
	}
	tflog.Debug(ctx, "using embedded engine", map[string]any{"data_dir": dataDir})
	c, err := daemon.Connect(ctx, daemon.ConnectOptions{DataDir: dataDir, Command: []string{exe, "engine", "serve"}, ClientOptions: clientOptions()})
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("data_dir"), "Cannot Start Embedded Engine",
			fmt.Sprintf("The embedded engine of %s did not start or did not answer.\n\nCheck that the directory is "+
				"writable and read its log, %s/%s; or run an engine yourself with 'mlcompute serve' and set endpoint "+
				"to it.\n\nOriginal error: %s", dataDir, dataDir, daemon.LogFile, err))
		return nil
	}
	tflog.Info(ctx, "connected to embedded engine", map[string]any{"endpoint": c.Endpoint(), "data_dir": dataDir})
	return c
}

// clientOptions are the provider's client settings: see readUnreachableWait.
func clientOptions() []client.Option {
	return []client.Option{client.WithUnreachableWait(readUnreachableWait)}
}

// checkEndpoint checks an endpoint's form and that a TCP endpoint has a token: a TCP port,
// loopback included, is open to every local user, so the engine always requires one.
// It returns the attribute at fault, a summary and a detail, or an empty summary.
func checkEndpoint(endpoint, token string) (attr, summary, detail string) {
	u, err := url.Parse(endpoint)
	bad := func(why string) (string, string, string) {
		return "endpoint", "Invalid Engine Endpoint", fmt.Sprintf("The endpoint %q %s.\n\nSet endpoint (or %s) to "+
			"unix:///path/to/engine.sock or http(s)://host:port, or remove it to use the embedded engine.", endpoint, why, envEndpoint)
	}
	switch {
	case err != nil:
		return bad(fmt.Sprintf("is not a URL (%v)", err))
	case u.Scheme == "unix":
		if u.Path == "" {
			return bad("names no socket path")
		}
		return "", "", ""
	case u.Scheme != "http" && u.Scheme != "https":
		return bad("has the scheme " + fmt.Sprintf("%q", u.Scheme) + "; the provider speaks unix, http and https")
	case u.Host == "":
		return bad("names no host")
	case token == "" && daemon.IsLoopbackHost(u.Hostname()):
		return "token", "Missing Engine Token", fmt.Sprintf("The endpoint %s is a TCP port, which every user of this "+
			"machine can reach, so the engine requires a token and the provider has none. An engine started with "+
			"'mlcompute serve --listen tcp://...' and no --token-file writes its token to %s in its data dir; the "+
			"provider found none in its data_dir.\n\nSet data_dir (or %s) to the engine's data dir, or set token "+
			"(or %s) to the engine's token.", endpoint, daemon.TokenFile, envHome, envToken)
	case token == "":
		return "token", "Missing Engine Token", fmt.Sprintf("The endpoint %s is reachable over the network, so the "+
			"engine requires a token and the provider has none.\n\nSet token (or %s) to the engine's token, the "+
			"contents of the file given to 'mlcompute serve --token-file'.", endpoint, envToken)
	}
	return "", "", ""
}

// valueOrEnv returns a configured string, else the environment variable's value.
func valueOrEnv(v types.String, env string) string {
	if s := v.ValueString(); s != "" {
		return s
	}
	return os.Getenv(env)
}

func (p *mlcomputeProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{
		NewWorkspaceResource,
		NewComputeClusterResource,
		NewComputeInstanceResource,
		NewAttachedComputeResource,
		NewEnvironmentResource,
		NewScheduleResource,
		NewOnlineEndpointResource,
	}
}

func (p *mlcomputeProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{
		NewVMSizesDataSource,
		NewIsolatedVMSizesDataSource,
		NewComputeDataSource,
	}
}

// clientFrom unpacks the provider data every resource and data source gets in Configure.
// It returns nil, and no error, before the provider is configured.
func clientFrom(data any, diags *diag.Diagnostics) *client.Client {
	if data == nil {
		return nil
	}
	d, ok := data.(*providerData)
	if !ok {
		diags.AddError("Unexpected Provider Data",
			fmt.Sprintf("Expected *providerData, got %T.\n\nThis is a bug in the provider; please report it.", data))
		return nil
	}
	return d.client
}

// providerData is what the provider's Configure hands its resources and data sources: the
// engine client, and the state of this provider instance's plan-time quota check.
type providerData struct {
	client *client.Client
	quotas *quotaPlans
}

// quotasFrom returns the plan-time quota state in the provider's data, nil before Configure.
func quotasFrom(data any) *quotaPlans {
	if d, ok := data.(*providerData); ok {
		return d.quotas
	}
	return nil
}

// readCACert returns the PEM ca_certificate holds: the PEM itself, or the path of a file
// holding it ("" when unset).
func readCACert(v string) ([]byte, error) {
	v = strings.TrimSpace(v)
	if v == "" || strings.Contains(v, "-----BEGIN") {
		return []byte(v), nil
	}
	raw, err := os.ReadFile(v)
	if err != nil {
		return nil, fmt.Errorf("neither a PEM certificate nor a readable file: %w", err)
	}
	return raw, nil
}
