package quota

import (
	"math"
	"testing"
)

func TestDemandIsCheckedArithmetic(t *testing.T) {
	for _, tc := range []struct {
		nodes, vcpus, want int64
		ok                 bool
	}{
		{4, 8, 32, true},
		{0, 8, 0, true},
		{65000, 416, 27040000, true},
		// 2^61 nodes of 4 vCPUs wraps to 0 in int64: it must not pass as a small demand.
		{1 << 61, 4, 0, false},
		{1 << 61, 8, 0, false},
		{math.MaxInt64, 2, 0, false},
		{-1, 4, 0, false},
		{4, -1, 0, false},
	} {
		got, ok := Demand(tc.nodes, tc.vcpus)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Demand(%d, %d) = %d, %v; want %d, %v", tc.nodes, tc.vcpus, got, ok, tc.want, tc.ok)
		}
	}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name              string
		used, want, limit int64
		fits              bool
		left, need        int64
	}{
		{"fits exactly", 16, 8, 24, true, 8, 24},
		{"one over", 16, 9, 24, false, 8, 25},
		{"nothing used", 0, 100, 100, true, 100, 100},
		{"approval family at 0", 0, 6, 0, false, 0, 6},
		{"over-used family leaves 0", 40, 1, 24, false, 0, 41},
		{"sum overflows", math.MaxInt64 - 1, 2, 100, false, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Check(tc.used, tc.want, tc.limit)
			if d.Fits != tc.fits || d.Left != tc.left || d.Need != tc.need {
				t.Fatalf("Check(%d, %d, %d) = %+v; want fits=%v left=%d need=%d", tc.used, tc.want, tc.limit, d, tc.fits, tc.left, tc.need)
			}
		})
	}
}
