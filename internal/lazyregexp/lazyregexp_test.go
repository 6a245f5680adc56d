package lazyregexp

import "testing"

func TestRegexpMatchesAsCompiledAndKeepsItsSource(t *testing.T) {
	re := New(`^[a-z][a-z0-9-]{0,3}$`)
	if got := re.String(); got != `^[a-z][a-z0-9-]{0,3}$` {
		t.Fatalf("String() = %q", got)
	}
	for s, want := range map[string]bool{"a": true, "ab-1": true, "ab-12": false, "1a": false, "": false} {
		if got := re.MatchString(s); got != want {
			t.Errorf("MatchString(%q) = %v, want %v", s, got, want)
		}
	}
	if m := New(`^(\d+)-(\d+)$`).FindStringSubmatch("12-34"); len(m) != 3 || m[1] != "12" || m[2] != "34" {
		t.Errorf("FindStringSubmatch = %q", m)
	}
}

func TestBadPatternPanicsOnFirstUse(t *testing.T) {
	re := New(`(`) // no panic yet: nothing compiled
	defer func() {
		if recover() == nil {
			t.Fatal("a bad pattern did not panic on first use")
		}
	}()
	re.MatchString("x")
}
