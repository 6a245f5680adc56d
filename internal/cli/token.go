package cli

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

func newTokenCommand(g *globals) *cobra.Command {
	token := &cobra.Command{Use: "token", Short: "API tokens: their roles and workspaces (operators only)"}
	token.AddCommand(newTokenCreateCommand(g), newTokenListCommand(g), newTokenRevokeCommand(g))
	return token
}

func newTokenCreateCommand(g *globals) *cobra.Command {
	var (
		spec    api.TokenSpec
		expires string
		output  string
	)
	cmd := &cobra.Command{
		Use:   "create --name N --role reader|contributor|operator [--workspace W]... [--expires D]",
		Short: "Make an API token and print its secret, which is shown this once",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			if spec.Name == "" {
				return fmt.Errorf("--name is required")
			}
			if !slices.Contains(api.Roles(), spec.Role) {
				return fmt.Errorf("--role must be one of %s, got %q", strings.Join(api.Roles(), ", "), spec.Role)
			}
			if expires != "" {
				d, err := parseExpiry(expires)
				if err != nil {
					return err
				}
				spec.ExpiresInSeconds = int64(d / time.Second)
			}
			c, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			created, err := c.CreateToken(cmd.Context(), spec)
			if err != nil {
				return err
			}
			if output == "json" {
				return printJSON(cmd.OutOrStdout(), created)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintln(w, created.Secret)
			fmt.Fprintf(cmd.ErrOrStderr(), "token %q (%s, %s) made: the line above is its secret, shown this once; pass it as the provider's token or MLCOMPUTE_TOKEN\n",
				created.Name, created.Role, scopeText(created.Workspaces))
			return nil
		},
	}
	cmd.Flags().StringVar(&spec.Name, "name", "", "the token's name (in the audit log and a job's submitted_by)")
	cmd.Flags().StringVar(&spec.Role, "role", "", "reader, contributor or operator")
	cmd.Flags().StringArrayVar(&spec.Workspaces, "workspace", nil, "a workspace the token may act on (repeatable; none: every workspace)")
	cmd.Flags().StringVar(&expires, "expires", "", "how long the token works, e.g. 12h or 30d (default: until revoked)")
	addOutputFlag(cmd, &output)
	return cmd
}

// parseExpiry reads --expires: a Go duration (90m, 12h) or a number of days (30d).
func parseExpiry(s string) (time.Duration, error) {
	bad := fmt.Errorf("--expires must be a duration above 0 such as 90m, 12h or 30d, got %q", s)
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 32)
		if err != nil {
			return 0, bad
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, bad
		}
	}
	if d < time.Second {
		return 0, bad
	}
	return d, nil
}

func scopeText(workspaces []string) string {
	if len(workspaces) == 0 {
		return "every workspace"
	}
	return "workspaces " + strings.Join(workspaces, ", ")
}

func newTokenListCommand(g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the API tokens (never their secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			list, err := c.ListTokens(cmd.Context())
			if err != nil {
				return err
			}
			if output == "json" {
				return printJSON(cmd.OutOrStdout(), api.TokenList{Tokens: list})
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tROLE\tWORKSPACES\tCREATED\tEXPIRES\tCREATED_BY")
			for _, t := range list {
				ws := "*"
				if len(t.Workspaces) > 0 {
					ws = strings.Join(t.Workspaces, ",")
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.Name, t.Role, ws, timeText(t.CreatedAt), timeText(t.ExpiresAt), dash(t.CreatedBy))
			}
			return tw.Flush()
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

func timeText(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Format(time.RFC3339)
}

func newTokenRevokeCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke NAME",
		Short: "Revoke an API token: from its next request on it gets 401",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			if err := c.RevokeToken(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "token %q revoked\n", args[0])
			return nil
		},
	}
}

func newAuditCommand(g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Show the audit log: every change, job submit and denied token use (operators only)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			entries, err := c.Audit(cmd.Context())
			if err != nil {
				return err
			}
			if output == "json" {
				return printJSON(cmd.OutOrStdout(), api.AuditList{Entries: entries})
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "TIME\tTOKEN\tRESULT\tSTATUS\tACTION\tTARGET\tREASON")
			for _, e := range entries {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", e.Time.Format(time.RFC3339), e.Token, e.Result, e.Status, e.Action, e.Target, dash(e.Reason))
			}
			return tw.Flush()
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}
