package imagearchive_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/imagearchive"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/imagearchive/imagearchivetest"
)

func TestReadsDockerAndOCIArchives(t *testing.T) {
	dir := t.TempDir()
	files := imagearchivetest.Layer{"usr/lib/mlctest/VERSION": "1.0"}
	docker := filepath.Join(dir, "docker.tar")
	dockerDigest := imagearchivetest.Docker(t, docker, "example.com/train:1", files)
	oci := filepath.Join(dir, "oci.tar")
	ociDigest := imagearchivetest.OCI(t, oci, "example.com/train:1", files)

	for _, c := range []struct {
		file, digest string
		format       imagearchive.Format
	}{{docker, dockerDigest, imagearchive.Docker}, {oci, ociDigest, imagearchive.OCI}} {
		img, err := imagearchive.ReadFile(c.file)
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		if img.ConfigDigest != c.digest || img.Format != c.format || img.Layers != 1 || len(img.RepoTags) != 1 || img.RepoTags[0] != "example.com/train:1" {
			t.Fatalf("%s: read %+v, want config %s in format %s with one layer and its tag", c.file, img, c.digest, c.format)
		}
	}
	// The same layer in either layout is the same config: one digest.
	if dockerDigest != ociDigest {
		t.Fatalf("one image, two digests: docker %s, oci %s", dockerDigest, ociDigest)
	}

	other := filepath.Join(dir, "other.tar")
	if d := imagearchivetest.Docker(t, other, "example.com/train:1", imagearchivetest.Layer{"usr/lib/mlctest/VERSION": "2.0"}); d == dockerDigest {
		t.Fatalf("a layer of other content kept the digest %s", d)
	}
}

func TestReadsGzippedArchives(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "image.tar")
	want := imagearchivetest.Docker(t, plain, "t:1", imagearchivetest.Layer{"a": "b"})
	raw, err := os.ReadFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	img, err := imagearchive.Read(&buf)
	if err != nil || img.ConfigDigest != want {
		t.Fatalf("gzipped archive: %+v, %v; want %s", img, err, want)
	}
}

func TestRefusesWhatIsNotAnImage(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.tar")
	imagearchivetest.Docker(t, good, "t:1", imagearchivetest.Layer{"a": "b"})
	goodBytes, _ := os.ReadFile(good)

	tarOf := func(files map[string]string) []byte {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for n, c := range files {
			if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(c)), Typeflag: tar.TypeReg}); err != nil {
				t.Fatal(err)
			}
			if _, err := tw.Write([]byte(c)); err != nil {
				t.Fatal(err)
			}
		}
		tw.Close()
		return buf.Bytes()
	}
	for name, c := range map[string]struct {
		content []byte
		says    string
	}{
		"text":            {[]byte("FROM busybox\nRUN echo hi\n"), "not a tar archive"},
		"empty":           {nil, "an empty file"},
		"plain tar":       {tarOf(map[string]string{"README": "hello"}), "neither index.json"},
		"truncated":       {goodBytes[:len(goodBytes)/2], "ends early or is damaged"},
		"two images":      {tarOf(map[string]string{"manifest.json": `[{"Config":"a.json"},{"Config":"b.json"}]`}), "of 2 images"},
		"missing config":  {tarOf(map[string]string{"manifest.json": `[{"Config":"a.json","Layers":[]}]`}), `lacks the config "a.json"`},
		"missing layer":   {tarOf(map[string]string{"manifest.json": `[{"Config":"a.json","Layers":["l/layer.tar"]}]`, "a.json": `{"rootfs":{"diff_ids":["sha256:x"]}}`}), `lacks the layer "l/layer.tar"`},
		"bad oci index":   {tarOf(map[string]string{"index.json": `{`}), "index.json is not JSON"},
		"oci, no blob":    {tarOf(map[string]string{"index.json": `{"manifests":[{"digest":"sha256:` + strings.Repeat("a", 64) + `"}]}`}), "lacks the blob"},
		"oci, bad digest": {tarOf(map[string]string{"index.json": `{"manifests":[{"digest":"md5:abc"}]}`}), "not a sha256 digest"},
		"oci, no images":  {tarOf(map[string]string{"index.json": `{"manifests":[]}`}), "names 0 images"},
	} {
		f := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
		if err := os.WriteFile(f, c.content, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := imagearchive.ReadFile(f)
		if !errors.Is(err, imagearchive.ErrNotImage) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: error %v; want ErrNotImage saying %q", name, err, c.says)
		}
	}
	if _, err := imagearchive.ReadFile(dir); !errors.Is(err, imagearchive.ErrNotImage) || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("a directory: %v", err)
	}
	if _, err := imagearchive.ReadFile(filepath.Join(dir, "absent.tar")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}
