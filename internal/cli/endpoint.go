package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/tlsconfig"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

func newEndpointCommand(g *globals) *cobra.Command {
	endpoint := &cobra.Command{Use: "endpoint", Short: "Show online endpoints, score requests, and manage their credentials"}
	endpoint.AddCommand(newEndpointListCommand(g), newEndpointShowCommand(g), newEndpointInvokeCommand(g),
		newEndpointRegenerateKeysCommand(g), newEndpointGetCredentialsCommand(g))
	return endpoint
}

func newEndpointListCommand(g *globals) *cobra.Command {
	var ws, output string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List a workspace's online endpoints with their state and traffic",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.workspaceClient(cmd.Context(), ws, output)
			if err != nil {
				return err
			}
			list, err := c.ListEndpoints(cmd.Context(), ws)
			if err != nil {
				return err
			}
			if output == "json" {
				return printJSON(cmd.OutOrStdout(), api.EndpointList{Endpoints: nonNilList(list)})
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSTATE\tAUTH\tTRAFFIC\tSCORING_URI")
			for _, ep := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", ep.Name, ep.ProvisioningState, ep.AuthMode, dash(formatPercents(ep.Traffic)), dash(ep.ScoringURI))
			}
			return tw.Flush()
		},
	}
	addWorkspaceFlag(cmd, &ws)
	addOutputFlag(cmd, &output)
	return cmd
}

func newEndpointShowCommand(g *globals) *cobra.Command {
	var ws, output string
	cmd := &cobra.Command{
		Use:   "show NAME",
		Short: "Show an online endpoint, its deployments and each instance's state",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.workspaceClient(cmd.Context(), ws, output)
			if err != nil {
				return err
			}
			ep, err := c.GetEndpoint(cmd.Context(), ws, args[0])
			if err != nil {
				return err
			}
			if output == "json" {
				return printJSON(cmd.OutOrStdout(), ep)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%s (auth %s)\n", ep.ID, ep.AuthMode)
			fmt.Fprintf(w, "state: %s\n", ep.ProvisioningState)
			if ep.Error != "" {
				fmt.Fprintf(w, "error: %s\n", ep.Error)
			}
			fmt.Fprintf(w, "scoring_uri: %s\n", dash(ep.ScoringURI))
			fmt.Fprintf(w, "traffic: %s\n", dash(formatPercents(ep.Traffic)))
			if !maps.Equal(ep.LiveTraffic, ep.Traffic) {
				fmt.Fprintf(w, "live traffic: %s (until the rollout is done)\n", dash(formatPercents(ep.LiveTraffic)))
			}
			if len(ep.MirrorTraffic) > 0 {
				fmt.Fprintf(w, "mirror_traffic: %s\n", formatPercents(ep.MirrorTraffic))
			}
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "DEPLOYMENT\tSCALE\tREADY/DESIRED\tIN_FLIGHT\tHELD")
			for _, name := range slices.Sorted(maps.Keys(ep.Deployments)) {
				d := ep.Deployments[name]
				scale := "fixed"
				if s := d.ScaleSettings; s.Autoscaled() {
					scale = fmt.Sprintf("%s %d..%d", s.Type, s.MinInstances, s.MaxInstances)
				}
				fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%d\t%d\n", name, scale, d.ReadyInstances, d.DesiredInstances, d.RequestsInFlight, d.HeldRequests)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			for _, name := range slices.Sorted(maps.Keys(ep.Deployments)) {
				d := ep.Deployments[name]
				if len(d.ScaleDecisions) == 0 {
					continue
				}
				fmt.Fprintf(w, "scale decisions of %s (latest last):\n", name)
				for _, dec := range d.ScaleDecisions {
					fmt.Fprintf(w, "  %s  %d -> %d  %s (load %d, average %.2f, peak need %d)\n",
						dec.Time.UTC().Format(time.RFC3339Nano), dec.From, dec.To, dec.Reason, dec.Load, dec.AverageLoad, dec.PeakNeed)
				}
			}
			tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "DEPLOYMENT\tINSTANCE_TYPE\tGENERATION\tREADY\tINSTANCE\tSTATE\tRESTARTS")
			for _, name := range slices.Sorted(maps.Keys(ep.Deployments)) {
				d := ep.Deployments[name]
				ready := fmt.Sprintf("%d/%d", d.ReadyInstances, d.DesiredInstances)
				if len(d.Instances) == 0 {
					fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t-\t-\t-\n", name, d.InstanceType, d.Generation, ready)
				}
				for _, in := range d.Instances {
					fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%d\n", name, d.InstanceType, in.Generation, ready, in.ID, in.State, in.Restarts)
				}
			}
			return tw.Flush()
		},
	}
	addWorkspaceFlag(cmd, &ws)
	addOutputFlag(cmd, &output)
	return cmd
}

func newEndpointInvokeCommand(g *globals) *cobra.Command {
	var ws, deployment, data string
	cmd := &cobra.Command{
		Use:   "invoke NAME --data JSON",
		Short: "Send one scoring request to an online endpoint and print the response",
		Long: "Send one scoring request (POST scoring_uri) with the endpoint's primary key or a fresh " +
			"AML token, and print the response body. --data @FILE reads the body from a file. " +
			"--deployment pins the request to one deployment (header azureml-model-deployment). " +
			"A response other than 2xx exits non-zero after printing its status and body.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if data == "" {
				return fmt.Errorf("--data is required: the JSON request body, or @FILE")
			}
			body := []byte(data)
			if path, ok := strings.CutPrefix(data, "@"); ok {
				var err error
				if body, err = os.ReadFile(path); err != nil {
					return fmt.Errorf("reading --data: %w", err)
				}
			}
			c, err := g.workspaceClient(cmd.Context(), ws, "")
			if err != nil {
				return err
			}
			status, out, err := invoke(cmd.Context(), c, g.scoringCA, ws, args[0], deployment, body)
			if err != nil {
				return err
			}
			if status < 200 || status > 299 {
				fmt.Fprintf(cmd.ErrOrStderr(), "scoring request failed: %d %s\n%s", status, http.StatusText(status), withNewline(out))
				return exitCode(1)
			}
			_, err = cmd.OutOrStdout().Write(withNewline(out))
			return err
		},
	}
	addWorkspaceFlag(cmd, &ws)
	cmd.Flags().StringVar(&deployment, "deployment", "", "send the request to this deployment, whatever the traffic split")
	cmd.Flags().StringVar(&data, "data", "", "the request body (JSON), or @FILE")
	return cmd
}

// invoke scores one request and returns the response status and body. caFor gives the CA
// (PEM) that an https scoring_uri's certificate must chain to.
func invoke(ctx context.Context, c *client.Client, caFor func(scoringURI string) ([]byte, error), ws, name, deployment string, body []byte) (int, []byte, error) {
	ep, err := c.GetEndpoint(ctx, ws, name)
	if err != nil {
		return 0, nil, err
	}
	if ep.ScoringURI == "" {
		return 0, nil, fmt.Errorf("online endpoint %s has no scoring_uri: the engine serves no scoring router", name)
	}
	credential, err := credentialOf(ctx, c, ep)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.ScoringURI, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+credential)
	if deployment != "" {
		req.Header.Set("azureml-model-deployment", deployment)
	}
	transport := &http.Transport{Proxy: nil}
	if strings.HasPrefix(ep.ScoringURI, "https://") {
		ca, err := caFor(ep.ScoringURI)
		if err != nil {
			return 0, nil, err
		}
		if transport.TLSClientConfig, err = tlsconfig.Client(ca); err != nil {
			return 0, nil, err
		}
	}
	res, err := (&http.Client{Transport: transport}).Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("sending the scoring request: %w", err)
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("reading the scoring response: %w", err)
	}
	return res.StatusCode, out, nil
}

// credentialOf returns the primary key of a key endpoint, or a fresh AML token.
func credentialOf(ctx context.Context, c *client.Client, ep *api.Endpoint) (string, error) {
	if ep.AuthMode == api.AuthModeAMLToken {
		tok, err := c.GetEndpointToken(ctx, ep.Workspace, ep.Name)
		if err != nil {
			return "", err
		}
		return tok.AccessToken, nil
	}
	keys, err := c.GetEndpointKeys(ctx, ep.Workspace, ep.Name)
	if err != nil {
		return "", err
	}
	return keys.PrimaryKey, nil
}

func newEndpointRegenerateKeysCommand(g *globals) *cobra.Command {
	var ws, keyType string
	cmd := &cobra.Command{
		Use:   "regenerate-keys NAME --key-type primary|secondary",
		Short: "Replace an online endpoint's primary or secondary key",
		Long: "Replace one key of a key-auth online endpoint; the other keeps working, so clients can " +
			"move to it first. The old key is refused once this returns. The keys are not printed: " +
			"read them with 'mlcompute endpoint get-credentials'.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validation.KeyType(keyType); err != nil {
				return fmt.Errorf("--key-type: %w", err)
			}
			c, err := g.workspaceClient(cmd.Context(), ws, "")
			if err != nil {
				return err
			}
			if _, err := c.RegenerateEndpointKeys(cmd.Context(), ws, args[0], keyType); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "regenerated the %s key of %s\n", keyType, args[0])
			return nil
		},
	}
	addWorkspaceFlag(cmd, &ws)
	cmd.Flags().StringVar(&keyType, "key-type", "", "which key to replace: primary or secondary")
	return cmd
}

func newEndpointGetCredentialsCommand(g *globals) *cobra.Command {
	var ws string
	cmd := &cobra.Command{
		Use:     "get-credentials NAME",
		Aliases: []string{"get-token", "get-keys"},
		Short:   "Print an online endpoint's keys (key auth) or a fresh AML token (aml_token auth) as JSON",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.workspaceClient(cmd.Context(), ws, "")
			if err != nil {
				return err
			}
			ep, err := c.GetEndpoint(cmd.Context(), ws, args[0])
			if err != nil {
				return err
			}
			if ep.AuthMode == api.AuthModeAMLToken {
				tok, err := c.GetEndpointToken(cmd.Context(), ws, args[0])
				if err != nil {
					return err
				}
				return printJSON(cmd.OutOrStdout(), tok)
			}
			keys, err := c.GetEndpointKeys(cmd.Context(), ws, args[0])
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), keys)
		},
	}
	addWorkspaceFlag(cmd, &ws)
	return cmd
}

func formatPercents(m map[string]int64) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%d%%", k, m[k]))
	}
	return strings.Join(parts, ",")
}

func withNewline(b []byte) []byte {
	if len(b) > 0 && b[len(b)-1] != '\n' {
		return append(b, '\n')
	}
	return b
}

func nonNilList[T any](list []T) []T {
	if list == nil {
		return []T{}
	}
	return list
}
