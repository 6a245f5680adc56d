package enginetest

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// MakeWheel writes a pure-Python wheel of package name at version into dir, holding
// name/__init__.py with the given source, and returns its path. A wheel is a zip with the
// package and a <name>-<version>.dist-info directory (METADATA, WHEEL, RECORD), so tests
// make one offline with no build tools, and pip installs it through find_links.
func MakeWheel(dir, name, version, initPy string) (string, error) {
	path := filepath.Join(dir, fmt.Sprintf("%s-%s-py3-none-any.whl", name, version))
	info := fmt.Sprintf("%s-%s.dist-info", name, version)
	files := map[string]string{
		name + "/__init__.py": initPy,
		info + "/METADATA":    fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: a test package\n", name, version),
		info + "/WHEEL":       "Wheel-Version: 1.0\nGenerator: mlcompute-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var record strings.Builder
	for _, n := range names {
		sum := sha256.Sum256([]byte(files[n]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", n, base64.RawURLEncoding.EncodeToString(sum[:]), len(files[n]))
	}
	record.WriteString(info + "/RECORD,,\n")
	files[info+"/RECORD"] = record.String()
	names = append(names, info+"/RECORD")

	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	zw := zip.NewWriter(f)
	for _, n := range names {
		w, err := zw.Create(n)
		if err == nil {
			_, err = w.Write([]byte(files[n]))
		}
		if err != nil {
			f.Close()
			return "", err
		}
	}
	if err := zw.Close(); err != nil {
		f.Close()
		return "", err
	}
	return path, f.Close()
}
