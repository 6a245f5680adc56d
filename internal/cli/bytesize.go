package cli

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// byteUnits are the units a byte size may carry: decimal (KB = 1000 bytes) and binary
// (KiB = 1024 bytes), case-insensitive; no unit is bytes.
var byteUnits = []struct {
	suffix string
	scale  float64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
	{"b", 1},
}

// byteSize is a flag value holding a byte size written like 20GB, 512MiB or 1000.
type byteSize int64

func (b *byteSize) String() string { return formatByteSize(int64(*b)) }
func (b *byteSize) Type() string   { return "size" }

func (b *byteSize) Set(s string) error {
	n, err := parseByteSize(s)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}

// parseByteSize reads a size such as 20GB, 1.5GiB or 1000 (bytes).
func parseByteSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	scale := 1.0
	for _, u := range byteUnits {
		if rest, ok := strings.CutSuffix(t, u.suffix); ok {
			t, scale = strings.TrimSpace(rest), u.scale
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v <= 0 || math.IsInf(v, 0) || v*scale >= math.MaxInt64 {
		return 0, fmt.Errorf("%q is not a size: give a number above 0 with a unit, such as 20GB, 512MiB or 1000 (bytes; KB, MB, GB, TB count in 1000s, KiB, MiB, GiB, TiB in 1024s)", s)
	}
	return int64(math.Round(v * scale)), nil
}

// formatByteSize writes n in the largest decimal unit that holds it whole.
func formatByteSize(n int64) string {
	for _, u := range []struct {
		suffix string
		scale  int64
	}{{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}} {
		if n >= u.scale && n%u.scale == 0 {
			return fmt.Sprintf("%d%s", n/u.scale, u.suffix)
		}
	}
	return fmt.Sprintf("%dB", n)
}
