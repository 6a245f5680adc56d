// Package validation holds the input rules shared by the engine (which enforces them on every
// API call) and the Terraform provider (which applies the same functions at plan time), so
// both reject the same inputs with the same words.
package validation

import (
	"maps"
	"slices"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/lazyregexp"
)

// NameRule is a naming rule: a pattern and the sentence that explains it to users.
type NameRule struct {
	Kind    string
	Pattern *lazyregexp.Regexp
	Explain string
	// Extra, when set, rejects names the pattern alone lets through.
	Extra func(name string) string
}

var (
	WorkspaceName = NameRule{
		Kind:    "workspace",
		Pattern: lazyregexp.New(`^[a-zA-Z0-9][a-zA-Z0-9_-]{2,32}$`),
		Explain: "3 to 33 characters: letters, digits, '-' and '_', starting with a letter or digit",
	}
	ComputeName = NameRule{
		Kind:    "compute",
		Pattern: lazyregexp.New(`^[a-zA-Z][a-zA-Z0-9-]{2,23}$`),
		Explain: "3 to 24 characters: letters, digits and '-', starting with a letter and not ending in '-' followed by digits",
		Extra: func(name string) string {
			if endsInDashDigits.MatchString(name) {
				return "must not end in '-' followed by digits"
			}
			return ""
		},
	}
	EndpointName = NameRule{
		Kind:    "online endpoint",
		Pattern: lazyregexp.New(`^[a-zA-Z][a-zA-Z0-9-]{1,30}[a-zA-Z0-9]$`),
		Explain: "3 to 32 characters: letters, digits and '-', starting with a letter and ending with a letter or digit",
	}
	DeploymentName = NameRule{
		Kind:    "deployment",
		Pattern: lazyregexp.New(`^[a-zA-Z][a-zA-Z0-9-]{0,30}[a-zA-Z0-9]$`),
		Explain: "2 to 32 characters: letters, digits and '-', starting with a letter and ending with a letter or digit",
	}

	endsInDashDigits = lazyregexp.New(`-[0-9]+$`)
)

// Check returns an invalid-input error naming field when name breaks the rule.
func (r NameRule) Check(field, name string) error {
	if !r.Pattern.MatchString(name) {
		return api.Errorf(api.CodeInvalid, field, "invalid %s name %q: %s (pattern %s)", r.Kind, name, r.Explain, r.Pattern)
	}
	if r.Extra != nil {
		if why := r.Extra(name); why != "" {
			return api.Errorf(api.CodeInvalid, field, "invalid %s name %q: %s", r.Kind, name, why)
		}
	}
	return nil
}

// QuotaFamily checks a family name used as a quota key. Azure spells families in one exact
// way; a differently cased spelling is refused with the right one, because map keys that
// changed case between plan and apply would look like drift forever.
func QuotaFamily(field, family string) error {
	f, ok := catalog.LookupFamily(family)
	if !ok {
		return api.Errorf(api.CodeInvalid, field, "unknown VM family %q; allowed families: %s", family, strings.Join(FamilyNames(), ", "))
	}
	if f.Name != family {
		return api.Errorf(api.CodeInvalid, field, "VM family %q must be spelled %q", family, f.Name)
	}
	return nil
}

// Quota checks one entry of a workspace's quotas map.
func Quota(family string, limit int64) error {
	field := "quotas." + family
	if err := QuotaFamily(field, family); err != nil {
		return err
	}
	if limit < 0 {
		return api.Errorf(api.CodeInvalid, field, "quota for %s must be a vCPU count of 0 or more, got %d", family, limit)
	}
	return nil
}

// FamilyNames lists the catalog's families in order, for error messages and docs.
func FamilyNames() []string {
	families := catalog.Families()
	names := make([]string, len(families))
	for i, f := range families {
		names[i] = f.Name
	}
	return names
}

// Location checks that the engine serves a location.
func Location(location string, served []string) error {
	for _, l := range served {
		if l == location {
			return nil
		}
	}
	return api.Errorf(api.CodeInvalid, "location", "location %q is not served by this engine; allowed locations: %s (an operator adds one with 'mlcompute serve --location NAME')", location, strings.Join(served, ", "))
}

// Workspace checks a whole workspace spec.
func Workspace(spec api.WorkspaceSpec, served []string) error {
	if err := WorkspaceName.Check("name", spec.Name); err != nil {
		return err
	}
	if err := Location(spec.Location, served); err != nil {
		return err
	}
	return Quotas(spec.Quotas)
}

// Quotas checks every entry of a quotas map, in a stable order.
func Quotas(quotas map[string]int64) error {
	for _, family := range slices.Sorted(maps.Keys(quotas)) {
		if err := Quota(family, quotas[family]); err != nil {
			return err
		}
	}
	return nil
}
