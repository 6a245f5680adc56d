package cli

import (
	"strings"
	"testing"
)

func TestParseByteSize(t *testing.T) {
	for in, want := range map[string]int64{
		"20GB": 20_000_000_000, "20gb": 20_000_000_000, "512MiB": 512 << 20, "1.5GiB": 3 << 29,
		"1000": 1000, "7B": 7, " 3 KB ": 3000, "2TB": 2e12, "1KiB": 1024,
	} {
		got, err := parseByteSize(in)
		if err != nil || got != want {
			t.Errorf("parseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "GB", "-1GB", "0", "ten", "1PB", "1e30TB"} {
		if _, err := parseByteSize(in); err == nil || !strings.Contains(err.Error(), "is not a size") {
			t.Errorf("parseByteSize(%q) = %v; want an error that says what a size is", in, err)
		}
	}
	for n, want := range map[int64]string{20_000_000_000: "20GB", 1500: "1500B", 2e6: "2MB"} {
		if got := formatByteSize(n); got != want {
			t.Errorf("formatByteSize(%d) = %q; want %q", n, got, want)
		}
	}
}
