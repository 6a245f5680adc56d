package environment

import (
	"slices"
	"strings"
	"testing"
)

func TestGarbage(t *testing.T) {
	h1, h2, h3 := strings.Repeat("1", 64), strings.Repeat("2", 64), strings.Repeat("3", 64)
	tests := []struct {
		name          string
		cached, inUse []string
		want          []string
	}{
		{"nothing cached", nil, []string{h1}, nil},
		{"every build in use", []string{CacheName(h1), CacheName(h2)}, []string{h1, h2}, nil},
		{"an old hash nobody uses", []string{CacheName(h1), CacheName(h2)}, []string{h2}, []string{CacheName(h1)}},
		{"nothing in use: all builds go", []string{CacheName(h2), CacheName(h1), CacheName(h1)}, nil, []string{CacheName(h1), CacheName(h2)}},
		{"in use but not cached changes nothing", []string{CacheName(h1)}, []string{h3, h1}, nil},
		{"names the engine did not make stay", []string{"builds", CacheName(h1) + ".lock", "ABCDEF0123456789", "notes", CacheName(h1) + ".new-12"}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Garbage(tt.cached, tt.inUse); !slices.Equal(got, tt.want) {
				t.Fatalf("Garbage(%v, %v) = %v; want %v", tt.cached, tt.inUse, got, tt.want)
			}
		})
	}
}
