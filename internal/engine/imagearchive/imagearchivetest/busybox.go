package imagearchivetest

import (
	"maps"
	"os"
	"testing"
)

// Busybox writes a Docker archive to name of an image tagged tag that holds the host's
// static busybox at /bin/busybox and at each of applets' paths (such as "bin/sh"), an
// empty /tmp, and files; it returns the config digest. `make test-deps` installs busybox
// (Debian package busybox-static).
func Busybox(t testing.TB, name, tag string, files Layer, applets ...string) string {
	t.Helper()
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatal("this test needs the host's static busybox: run `make test-deps` (Debian package busybox-static)")
	}
	layer := Layer{"bin/busybox": string(bb), "tmp/.keep": ""}
	for _, a := range applets {
		layer[a] = string(bb)
	}
	maps.Copy(layer, files)
	return Docker(t, name, tag, layer)
}
