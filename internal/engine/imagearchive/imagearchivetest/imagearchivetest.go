// Package imagearchivetest writes small, real image archives for tests: a Docker archive
// or an OCI image layout in a tar, of one image whose one layer holds the files given.
package imagearchivetest

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"sort"
	"testing"
)

// Layer is a layer's files: path in the image to content. A file whose content starts as a
// program does ("#!" or an ELF header) is executable.
type Layer map[string]string

// Docker writes a Docker archive (as docker save writes it) of one image, tagged tag, with
// one layer of files, to name, and returns the config digest.
func Docker(t testing.TB, name, tag string, files Layer) string {
	t.Helper()
	layer := layerTar(t, files)
	cfg := config(layer)
	cfgName := hex256(cfg) + ".json"
	layerName := hex256(layer) + "/layer.tar"
	manifest, _ := json.Marshal([]map[string]any{{"Config": cfgName, "RepoTags": []string{tag}, "Layers": []string{layerName}}})
	write(t, name, map[string][]byte{cfgName: cfg, layerName: layer, "manifest.json": manifest})
	return "sha256:" + hex256(cfg)
}

// OCI writes an OCI image layout in a tar (as skopeo's oci-archive writes it) of one image,
// named ref, with one layer of files, to name, and returns the config digest.
func OCI(t testing.TB, name, ref string, files Layer) string {
	t.Helper()
	layer := layerTar(t, files)
	cfg := config(layer)
	manifest, _ := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": "sha256:" + hex256(cfg), "size": len(cfg)},
		"layers": []map[string]any{{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": "sha256:" + hex256(layer), "size": len(layer)}},
	})
	index, _ := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
		"manifests": []map[string]any{{
			"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:" + hex256(manifest), "size": len(manifest),
			"annotations": map[string]string{"org.opencontainers.image.ref.name": ref},
		}},
	})
	write(t, name, map[string][]byte{
		"oci-layout": []byte(`{"imageLayoutVersion":"1.0.0"}`), "index.json": index,
		"blobs/sha256/" + hex256(cfg): cfg, "blobs/sha256/" + hex256(layer): layer, "blobs/sha256/" + hex256(manifest): manifest,
	})
	return "sha256:" + hex256(cfg)
}

func config(layer []byte) []byte {
	cfg, _ := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux",
		"config": map[string]any{"Env": []string{"PATH=/usr/local/bin:/usr/bin:/bin"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex256(layer)}},
	})
	return cfg
}

func layerTar(t testing.TB, files Layer) []byte {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	m := map[string][]byte{}
	for _, n := range names {
		m[n] = []byte(files[n])
	}
	return tarBytes(t, m)
}

func mode(content []byte) int64 {
	if bytes.HasPrefix(content, []byte("#!")) || bytes.HasPrefix(content, []byte("\x7fELF")) {
		return 0o755
	}
	return 0o644
}

func tarBytes(t testing.TB, files map[string][]byte) []byte {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: mode(files[n]), Size: int64(len(files[n])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(files[n]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func write(t testing.TB, name string, files map[string][]byte) {
	t.Helper()
	if err := os.WriteFile(name, tarBytes(t, files), 0o644); err != nil {
		t.Fatal(err)
	}
}

func hex256(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
