// Package imagearchive reads container image archives: an OCI image layout in a tar
// (`docker save` of Docker 25 and later, `skopeo copy ... oci-archive:`, `buildah push ...
// oci-archive:`) or a Docker archive (`docker save`, `podman save`), either of them plain
// or gzip-compressed. It finds the archive's one image and its config digest, which is
// what an environment's content hash covers (DESIGN 8): the config names every layer by the
// digest of its content, so the same digest is the same image.
//
// It reads the archive in one pass, keeps only its small entries (manifests, configs) in
// memory, and checks that every blob the image's manifest names is in the archive.
package imagearchive

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
)

// Format is the layout an archive was found in.
type Format string

const (
	// OCI is an OCI image layout (oci-layout, index.json, blobs/<alg>/<hex>).
	OCI Format = "oci"
	// Docker is a Docker archive (manifest.json naming a config file and layer files).
	Docker Format = "docker"
)

// Image is the one image of an archive.
type Image struct {
	Format Format
	// ConfigDigest is the digest of the image's config, "sha256:<64 hex digits>".
	ConfigDigest string
	// Layers is how many layers the image has.
	Layers int
	// RepoTags are the names the archive gives the image (a Docker archive's RepoTags, an
	// OCI index's org.opencontainers.image.ref.name annotations), perhaps none.
	RepoTags []string
}

// ErrNotImage wraps every reason an archive is not an image archive this package reads.
var ErrNotImage = errors.New("not an OCI or Docker image archive")

// smallEntry is the largest entry kept in memory: manifests, indexes and configs are far
// smaller; layers are not read at all.
const smallEntry = 4 << 20

// ReadFile reads the image archive at name.
func ReadFile(name string) (Image, error) {
	f, err := os.Open(name)
	if err != nil {
		return Image{}, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		return Image{}, fmt.Errorf("%w: %s is a directory; write the archive's file (docker save -o image.tar NAME)", ErrNotImage, name)
	}
	return Read(f)
}

// Read reads an image archive from r.
func Read(r io.Reader) (Image, error) {
	br := bufio.NewReader(r)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return Image{}, notImage("a broken gzip stream: %v", err)
		}
		defer zr.Close()
		r = zr
	} else {
		r = br
	}
	small := map[string][]byte{}
	present := map[string]bool{}
	tr := tar.NewReader(r)
	for n := 0; ; n++ {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			if n == 0 {
				return Image{}, notImage("an empty file or tar archive")
			}
			break
		}
		if err != nil {
			if n == 0 {
				return Image{}, notImage("not a tar archive (%v)", err)
			}
			return Image{}, notImage("a tar archive that ends early or is damaged (%v)", err)
		}
		if h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeSymlink && h.Typeflag != tar.TypeLink {
			continue
		}
		name := entryName(h.Name)
		present[name] = true
		switch {
		case h.Typeflag == tar.TypeSymlink, h.Typeflag == tar.TypeLink:
			// Docker archives link repeated layers to the first copy; the target is read
			// under its own name.
		case h.Size <= smallEntry:
			b, err := io.ReadAll(tr)
			if err != nil {
				return Image{}, notImage("a tar archive that ends early or is damaged (%v)", err)
			}
			small[name] = b
		}
	}
	if _, ok := small["index.json"]; ok {
		return readOCI(small, present)
	}
	if _, ok := small["manifest.json"]; ok {
		return readDocker(small, present)
	}
	return Image{}, notImage("a tar archive with neither index.json (an OCI image layout) nor manifest.json (a Docker archive)")
}

func notImage(format string, args ...any) error {
	return fmt.Errorf("%w: the file is %s", ErrNotImage, fmt.Sprintf(format, args...))
}

func entryName(n string) string {
	return strings.TrimPrefix(path.Clean("/"+n), "/")
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Annotations map[string]string `json:"annotations"`
	Platform    *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform"`
}

type ociIndex struct {
	MediaType string       `json:"mediaType"`
	Manifests []descriptor `json:"manifests"`
}

type ociManifest struct {
	MediaType string       `json:"mediaType"`
	Config    descriptor   `json:"config"`
	Layers    []descriptor `json:"layers"`
}

const (
	mediaOCIIndex     = "application/vnd.oci.image.index.v1+json"
	mediaDockerList   = "application/vnd.docker.distribution.manifest.list.v2+json"
	maxIndexNesting   = 4
	refNameAnnotation = "org.opencontainers.image.ref.name"
)

// readOCI follows index.json to the one image manifest (through nested indexes, choosing
// linux images when an index holds several platforms) and checks its blobs.
func readOCI(small map[string][]byte, present map[string]bool) (Image, error) {
	var idx ociIndex
	if err := json.Unmarshal(small["index.json"], &idx); err != nil {
		return Image{}, notImage("an OCI layout whose index.json is not JSON (%v)", err)
	}
	var tags []string
	for depth := 0; ; depth++ {
		ms := idx.Manifests
		if len(ms) > 1 {
			ms = linuxOnly(ms)
		}
		if len(ms) != 1 {
			return Image{}, notImage("an OCI layout whose index names %d images; an environment's archive holds exactly one", len(ms))
		}
		d := ms[0]
		if t := d.Annotations[refNameAnnotation]; t != "" {
			tags = append(tags, t)
		}
		raw, err := blob(small, present, d.Digest)
		if err != nil {
			return Image{}, err
		}
		if d.MediaType == mediaOCIIndex || d.MediaType == mediaDockerList {
			if depth == maxIndexNesting {
				return Image{}, notImage("an OCI layout whose indexes nest more than %d deep", maxIndexNesting)
			}
			if err := json.Unmarshal(raw, &idx); err != nil {
				return Image{}, notImage("an OCI layout whose index %s is not JSON (%v)", d.Digest, err)
			}
			continue
		}
		var m ociManifest
		if err := json.Unmarshal(raw, &m); err != nil || m.Config.Digest == "" {
			return Image{}, notImage("an OCI layout whose manifest %s names no config", d.Digest)
		}
		if _, err := blob(small, present, m.Config.Digest); err != nil {
			return Image{}, err
		}
		for _, l := range m.Layers {
			if err := hasBlob(present, l.Digest); err != nil {
				return Image{}, err
			}
		}
		return Image{Format: OCI, ConfigDigest: m.Config.Digest, Layers: len(m.Layers), RepoTags: tags}, nil
	}
}

func linuxOnly(ms []descriptor) []descriptor {
	var out []descriptor
	for _, d := range ms {
		if d.Platform == nil || d.Platform.OS == "linux" {
			out = append(out, d)
		}
	}
	return out
}

// blobPath is where an OCI layout keeps the blob of a digest.
func blobPath(digest string) (string, error) {
	alg, hexPart, ok := strings.Cut(digest, ":")
	if !ok || alg != "sha256" || len(hexPart) != 64 || strings.Trim(hexPart, "0123456789abcdef") != "" {
		return "", notImage("an OCI layout naming a blob by %q, not a sha256 digest", digest)
	}
	return "blobs/sha256/" + hexPart, nil
}

func hasBlob(present map[string]bool, digest string) error {
	p, err := blobPath(digest)
	if err != nil {
		return err
	}
	if !present[p] {
		return notImage("an OCI layout that lacks the blob %s its manifest names", digest)
	}
	return nil
}

// blob returns a small blob's content after checking it has the digest that names it.
func blob(small map[string][]byte, present map[string]bool, digest string) ([]byte, error) {
	if err := hasBlob(present, digest); err != nil {
		return nil, err
	}
	p, _ := blobPath(digest)
	raw, ok := small[p]
	if !ok {
		return nil, notImage("an OCI layout whose manifest or config %s is larger than %d bytes", digest, smallEntry)
	}
	if got := sha256Digest(raw); got != digest {
		return nil, notImage("an OCI layout whose blob %s has the content of %s (damaged)", digest, got)
	}
	return raw, nil
}

func sha256Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

type dockerManifest struct {
	Config   string   `json:"Config"`
	RepoTags []string `json:"RepoTags"`
	Layers   []string `json:"Layers"`
}

// readDocker reads manifest.json's one image: its config file's digest, and its layers'
// presence.
func readDocker(small map[string][]byte, present map[string]bool) (Image, error) {
	var ms []dockerManifest
	if err := json.Unmarshal(small["manifest.json"], &ms); err != nil {
		return Image{}, notImage("a Docker archive whose manifest.json is not a list of images (%v)", err)
	}
	if len(ms) != 1 {
		return Image{}, notImage("a Docker archive of %d images; an environment's archive holds exactly one (docker save -o image.tar ONE-IMAGE)", len(ms))
	}
	m := ms[0]
	raw, ok := small[entryName(m.Config)]
	if m.Config == "" || !ok {
		return Image{}, notImage("a Docker archive that lacks the config %q its manifest.json names", m.Config)
	}
	var cfg struct {
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return Image{}, notImage("a Docker archive whose config %s is not JSON (%v)", m.Config, err)
	}
	if len(cfg.RootFS.DiffIDs) != len(m.Layers) {
		return Image{}, notImage("a Docker archive whose config names %d layers and manifest.json %d", len(cfg.RootFS.DiffIDs), len(m.Layers))
	}
	for _, l := range m.Layers {
		if !present[entryName(l)] {
			return Image{}, notImage("a Docker archive that lacks the layer %q its manifest.json names", l)
		}
	}
	return Image{Format: Docker, ConfigDigest: sha256Digest(raw), Layers: len(m.Layers), RepoTags: m.RepoTags}, nil
}
