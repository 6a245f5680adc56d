//go:build linux

package imagearchivetest

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// skippedStdlib are the standard library's directories an image for tests leaves out: the
// tests, the GUI, and what is built again at import.
var skippedStdlib = map[string]bool{
	"test": true, "tests": true, "idlelib": true, "tkinter": true, "turtledemo": true,
	"lib2to3": true, "pydoc_data": true, "__pycache__": true,
}

// HostPython is a layer with this machine's Debian python3 in it, made offline: the
// interpreter, its standard library (without tests and GUI), the wheels Debian's ensurepip
// installs pip from (so venv and pip work in it), the shared libraries all of these load,
// and the static busybox as /bin/sh. `make test-deps` installs python3-venv and
// busybox-static.
func HostPython(t testing.TB) Layer {
	t.Helper()
	exe, err := filepath.EvalSymlinks("/usr/bin/python3")
	if err != nil {
		t.Fatalf("this test needs Debian's python3 in /usr/bin: run `make test-deps` (%v)", err)
	}
	layer := Layer{}
	add := func(name, src string) {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		layer[strings.TrimPrefix(name, "/")] = string(b)
	}
	add("/usr/bin/python3", exe)
	add(exe, exe)
	add("/bin/sh", "/bin/busybox")
	layer["tmp/.keep"] = ""
	stdlib := filepath.Join("/usr/lib", filepath.Base(exe))
	var loaded []string // what ldd must resolve: the interpreter and its extension modules
	loaded = append(loaded, exe)
	err = filepath.WalkDir(stdlib, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && skippedStdlib[d.Name()] || strings.HasPrefix(d.Name(), "config-"):
			return filepath.SkipDir
		case d.IsDir():
			return nil
		}
		add(p, p)
		if strings.HasSuffix(p, ".so") {
			loaded = append(loaded, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wheels, _ := filepath.Glob("/usr/share/python-wheels/*.whl")
	if len(wheels) == 0 {
		t.Fatal("this test needs Debian's python3-venv (its wheels in /usr/share/python-wheels): run `make test-deps`")
	}
	for _, w := range wheels {
		add(w, w)
	}
	out, err := exec.Command("ldd", loaded...).Output()
	if err != nil {
		t.Fatalf("ldd: %v", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		var lib string
		switch {
		case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
			lib = f[2]
		case len(f) >= 1 && strings.HasPrefix(f[0], "/") && !strings.HasSuffix(f[0], ":"):
			lib = f[0] // the dynamic linker, named by its own path
		default:
			continue
		}
		real, err := filepath.EvalSymlinks(lib)
		if err != nil {
			t.Fatal(err)
		}
		add(lib, real)
	}
	return layer
}
