package httpsyntax

import (
	"net/url"
	"testing"
)

func TestParseContentLength(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "42": 42, "999999999999999999": 999999999999999999,
		"": -1, "-1": -1, "+1": -1, " 1": -1, "1 ": -1, "0x10": -1, "1000000000000000000": -1,
	} {
		if got := ParseContentLength(in); got != want {
			t.Errorf("ParseContentLength(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestHasToken(t *testing.T) {
	for _, tc := range []struct {
		v, token string
		want     bool
	}{
		{"close", "close", true},
		{"keep-alive, Upgrade", "upgrade", true},
		{" keep-alive ,\tclose ", "close", true},
		{"closed", "close", false},
		{"", "close", false},
	} {
		if got := HasToken(tc.v, tc.token); got != tc.want {
			t.Errorf("HasToken(%q, %q) = %v, want %v", tc.v, tc.token, got, tc.want)
		}
	}
}

// PlainPath holds to net/url: a path it calls plain parses with an empty RawPath and
// comes back from EscapedPath unchanged; every other printable byte does not.
func TestPlainPathAgreesWithNetURL(t *testing.T) {
	for c := byte(0x21); c < 0x7f; c++ {
		if c == '?' || c == '#' || c == '%' {
			continue // not part of a path's bytes
		}
		p := "/a" + string(c) + "b"
		u, err := url.ParseRequestURI(p)
		if err != nil {
			if PlainPath(p) {
				t.Errorf("%q: plain, but net/url refuses it: %v", p, err)
			}
			continue
		}
		kept := u.RawPath == "" && u.EscapedPath() == p
		if PlainPath(p) != kept {
			t.Errorf("%q: PlainPath %v, net/url keeps it as it is: %v (RawPath %q)", p, PlainPath(p), kept, u.RawPath)
		}
	}
}
