package artifacts

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"
	"unicode/utf8"
)

// The types of an output, as Azure ML's job YAML spells them.
const (
	TypeFolder = "uri_folder"
	TypeFile   = "uri_file"
)

// digestPrefix starts every digest this package writes: "sha256:<64 hex digits>".
const digestPrefix = "sha256:"

// File is one regular file of an output.
type File struct {
	// Path is slash-separated and relative to the output's root: valid UTF-8, no "..",
	// not absolute, never "." or empty.
	Path string `json:"path"`
	Size int64  `json:"size"`
	// Digest is "sha256:<hex>" of the file's content; the blob of that name holds it.
	Digest     string `json:"digest"`
	Executable bool   `json:"executable,omitempty"`
}

// Manifest lists an output's files. Its canonical encoding is the JSON Encode writes
// (fields in this order, Files sorted by Path, no insignificant space), and Digest is the
// sha256 of that encoding. A manifest is itself stored as a blob under its digest.
type Manifest struct {
	Type  string `json:"type"`
	Files []File `json:"files"`
}

// Size is the sum of the files' sizes.
func (m Manifest) Size() int64 {
	var n int64
	for _, f := range m.Files {
		n += f.Size
	}
	return n
}

// Encode returns the canonical encoding. It fails on a manifest that Check refuses.
func (m Manifest) Encode() ([]byte, error) {
	if err := m.Check(); err != nil {
		return nil, err
	}
	if m.Files == nil {
		m.Files = []File{}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encoding manifest: %w", err)
	}
	return b, nil
}

// Digest returns "sha256:<hex>" of the canonical encoding.
func (m Manifest) Digest() (string, error) {
	b, err := m.Encode()
	if err != nil {
		return "", err
	}
	return digestOf(b), nil
}

// Check reports the first thing that makes m not canonical: an unknown type, a file
// path that is not clean, relative and valid UTF-8, files out of order or repeated, a
// malformed digest, a negative size, or a uri_file manifest without exactly one file.
func (m Manifest) Check() error {
	switch m.Type {
	case TypeFolder:
	case TypeFile:
		if len(m.Files) != 1 {
			return fmt.Errorf("manifest of type %s has %d files, want 1", TypeFile, len(m.Files))
		}
	default:
		return fmt.Errorf("manifest type %q: want %s or %s", m.Type, TypeFolder, TypeFile)
	}
	for i, f := range m.Files {
		if err := checkPath(f.Path); err != nil {
			return fmt.Errorf("manifest file %q: %w", f.Path, err)
		}
		if _, err := blobName(f.Digest); err != nil {
			return fmt.Errorf("manifest file %q: %w", f.Path, err)
		}
		if f.Size < 0 {
			return fmt.Errorf("manifest file %q: negative size", f.Path)
		}
		if i > 0 && m.Files[i-1].Path >= f.Path {
			return fmt.Errorf("manifest files not sorted or repeated at %q", f.Path)
		}
	}
	return nil
}

// decodeManifest parses b and insists that it is canonical, so that a manifest read back
// has the digest it was stored under.
func decodeManifest(b []byte) (Manifest, error) {
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return Manifest{}, fmt.Errorf("decoding manifest: %w", err)
	}
	again, err := m.Encode()
	if err != nil {
		return Manifest{}, err
	}
	if !bytes.Equal(again, b) {
		return Manifest{}, fmt.Errorf("decoding manifest: not in canonical form")
	}
	return m, nil
}

func sortFiles(files []File) {
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
}

// checkPath accepts a clean, relative, slash-separated path of valid UTF-8 that does
// not climb with "..".
func checkPath(p string) error {
	switch {
	case p == "" || p == ".":
		return fmt.Errorf("empty name")
	case !utf8.ValidString(p):
		return fmt.Errorf("name is not valid UTF-8")
	case strings.ContainsRune(p, 0):
		return fmt.Errorf("name holds a NUL byte")
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("name is absolute")
	case p == ".." || strings.HasPrefix(p, "../") || strings.Contains(p, "/../") || strings.HasSuffix(p, "/.."):
		return fmt.Errorf("name escapes its directory with a .. component")
	case path.Clean(p) != p:
		return fmt.Errorf("name is not clean")
	}
	return nil
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return digestPrefix + hex.EncodeToString(sum[:])
}

// blobName returns the hex of a "sha256:<hex>" digest, which names its blob.
func blobName(digest string) (string, error) {
	h, ok := strings.CutPrefix(digest, digestPrefix)
	if !ok || len(h) != sha256.Size*2 {
		return "", fmt.Errorf("digest %q: want sha256:<64 hex digits>", digest)
	}
	for _, c := range h {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", fmt.Errorf("digest %q: want sha256:<64 lowercase hex digits>", digest)
		}
	}
	return h, nil
}
