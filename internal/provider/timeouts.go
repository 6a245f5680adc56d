package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
)

// This file holds what every resource with a `timeouts` attribute
// (terraform-plugin-framework-timeouts, attribute style: `timeouts = { delete = "20m" }`)
// shares: the attribute, with its defaults in the docs, the diagnostic for an engine call
// that the provider stopped waiting for, and whether a create cut off that way may have
// happened anyway.

// timeoutsAttribute is the optional `timeouts` attribute of a resource (what names it in
// the descriptions, "cluster") with create, update and delete timeouts and their defaults.
// The resource's model holds it as a timeouts.Value; a null one means the defaults.
func timeoutsAttribute(ctx context.Context, what string, create, update, del time.Duration) schema.Attribute {
	describe := func(op string, d time.Duration) string {
		return fmt.Sprintf("How long to wait for the engine to %s the %s, as a Go duration such as `30s`, `20m` or "+
			"`1h` (default: `%s`).", op, what, shortDuration(d))
	}
	a := timeouts.Attributes(ctx, timeouts.Opts{
		Create:            true,
		Update:            true,
		Delete:            true,
		CreateDescription: describe("create", create),
		UpdateDescription: describe("update", update),
		DeleteDescription: describe("delete", del),
	}).(schema.SingleNestedAttribute)
	a.MarkdownDescription = "How long Terraform waits for the engine, per operation, for example " +
		"`timeouts = { delete = \"45m\" }`. When a wait ends, the engine carries the operation on by itself, and " +
		"the next plan reads back what it then holds."
	return a
}

// addTimeoutError adds the diagnostic for an engine call cut off by the operation's
// timeout and reports true, when ctx (the call's context, bounded by the timeout) has
// passed its deadline. Otherwise it adds nothing and reports false, and the caller reports
// err as an engine error. operation is create, update or delete, the key in `timeouts`;
// action says what was being done, as a lowercase verb phrase ("delete compute cluster
// \"cpu\"").
func addTimeoutError(ctx context.Context, diags *diag.Diagnostics, summary, operation, action string, timeout time.Duration, err error) bool {
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return false
	}
	diags.AddError(summary, fmt.Sprintf("The provider stopped waiting for the engine to %s after %s, the %s timeout. "+
		"The engine carries the operation on by itself; the next plan reads back what it then holds.\n\n"+
		"Run the same command again to wait for it, or give the operation more time, for example "+
		"timeouts = { %s = \"%s\" }.\n\nOriginal error: %s", action, shortDuration(timeout), operation, operation,
		shortDuration(2*timeout), err))
	return true
}

// shortDuration writes a duration as the timeouts attribute takes it, without zero
// trailing units: 20m, 1h, 1h30m, 45s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// mayHaveCreated reports whether a failed create left it unknown if the engine created the
// object: the provider stopped waiting (its deadline passed) or lost the connection, as
// opposed to an answer from the engine, which refuses before it creates anything.
func mayHaveCreated(ctx context.Context, err error) bool {
	return ctx.Err() != nil || client.IsUnreachable(err)
}
