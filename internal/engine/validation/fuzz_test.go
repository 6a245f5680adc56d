package validation

import (
	"strings"
	"testing"
	"time"
	"unicode"
)

// FuzzDuration parses arbitrary ISO 8601 durations. It must never panic; an accepted one
// lies within the bounds, and writing it back (FormatDuration) parses to the same length.
func FuzzDuration(f *testing.F) {
	for _, seed := range []string{
		"PT120S", "PT15M", "P1D", "P1W", "P1DT2H", "PT0S", "P7D", "PT1.5S", "P1Y", "P1M", "PT-1S",
		"P", "PT", "", "PT1H1H", "P99999999999999999999D", "PT0.0000000001S", "PT1,5S", "P1DT", "pt1s",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		const lo, hi = time.Second, 30 * 24 * time.Hour
		d, err := Duration("d", s, lo, hi)
		if err != nil {
			return
		}
		if d < lo || d > hi {
			t.Fatalf("Duration(%q) = %s, outside [%s, %s]", s, d, lo, hi)
		}
		back, err := Duration("d", FormatDuration(d), lo, hi)
		if err != nil || back != d {
			t.Fatalf("Duration(%q) = %s, written %q, read back %s, %v", s, d, FormatDuration(d), back, err)
		}
	})
}

// FuzzNameRules checks every naming rule on arbitrary strings: never a panic, and an
// accepted name is short, ASCII letters, digits, '-' and '_' only (so it is safe in IDs,
// URL paths, file names and messages), and starts as the rule says.
func FuzzNameRules(f *testing.F) {
	for _, seed := range []string{
		"team-a", "cpu", "cpu-1", "a", "ab", "x-", "-x", "a/b", "a\nb", "a..b", "ÄÖÜ-name", "name\x00",
		strings.Repeat("a", 33), strings.Repeat("a", 34), "blue", "churn", "ws_1",
	} {
		f.Add(seed)
	}
	rules := []NameRule{WorkspaceName, ComputeName, EndpointName, DeploymentName}
	f.Fuzz(func(t *testing.T, name string) {
		for _, r := range rules {
			err := r.Check("name", name)
			if !r.Pattern.MatchString(name) && err == nil {
				t.Fatalf("%s rule accepted %q, which its pattern does not match", r.Kind, name)
			}
			if err != nil {
				continue
			}
			if len(name) < 2 || len(name) > 33 {
				t.Fatalf("%s rule accepted %q of length %d", r.Kind, name, len(name))
			}
			for _, c := range name {
				allowed := unicode.IsLetter(c) || unicode.IsDigit(c) || c == '-' || c == '_'
				if c > unicode.MaxASCII || !allowed {
					t.Fatalf("%s rule accepted %q with %q", r.Kind, name, c)
				}
			}
			if name[0] == '-' || name[0] == '_' {
				t.Fatalf("%s rule accepted %q starting with %q", r.Kind, name, name[0])
			}
		}
	})
}
