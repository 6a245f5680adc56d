package validation

import (
	"fmt"
	"net/url"
	"path"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/lazyregexp"
)

// EnvironmentName is the naming rule of environments (Azure's: letters, digits, '-', '_'
// and '.').
var EnvironmentName = NameRule{
	Kind:    "environment",
	Pattern: lazyregexp.New(`^[a-zA-Z0-9][a-zA-Z0-9._-]{0,253}$`),
	Explain: "1 to 254 characters: letters, digits, '.', '-' and '_', starting with a letter or digit",
}

// requirementRE is the subset of PEP 508 the engine accepts: a project name, optional
// extras, optional comma-separated version clauses, and an optional environment marker.
// Options ("-r file", "--index-url ...") and URLs are refused: they belong in find_links
// and index_url, where the engine can see them.
var requirementRE = lazyregexp.New(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?` +
	`(\s*\[\s*[A-Za-z0-9][A-Za-z0-9._-]*(\s*,\s*[A-Za-z0-9][A-Za-z0-9._-]*)*\s*\])?` +
	`(\s*(===|==|!=|<=|>=|~=|<|>)\s*[A-Za-z0-9.*+!_-]+(\s*,\s*(===|==|!=|<=|>=|~=|<|>)\s*[A-Za-z0-9.*+!_-]+)*)?` +
	`(\s*;\s*[^;]+)?$`)

// interpreterRE is a command name or path without spaces or shell metacharacters.
var interpreterRE = lazyregexp.New(`^[A-Za-z0-9_./+-]+$`)

// Requirement checks one pip requirement specifier.
func Requirement(field, req string) error {
	r := strings.TrimSpace(req)
	if r == "" {
		return api.Errorf(api.CodeInvalid, field, "%s is empty; write a requirement such as \"numpy==1.26.4\"", field)
	}
	if !requirementRE.MatchString(r) {
		return api.Errorf(api.CodeInvalid, field,
			"%s %q is not a requirement specifier: write a project name with optional [extras], version clauses and a marker, such as \"numpy>=1.26,<2\"; pip options and URLs go in find_links and index_url", field, req)
	}
	return nil
}

// FindLink checks one find_links entry: an absolute directory on the node, or an http(s) or
// file URL.
func FindLink(field, link string) error {
	switch {
	case strings.HasPrefix(link, "/"):
		if strings.ContainsRune(link, 0) {
			return api.Errorf(api.CodeInvalid, field, "%s contains a NUL byte", field)
		}
		return nil
	case strings.HasPrefix(link, "http://"), strings.HasPrefix(link, "https://"), strings.HasPrefix(link, "file://"):
		if u, err := url.Parse(link); err == nil && (u.Host != "" || u.Scheme == "file") {
			return nil
		}
	}
	return api.Errorf(api.CodeInvalid, field, "%s %q must be an absolute directory on the node (\"/srv/wheels\") or an http(s):// or file:// URL", field, link)
}

// IndexURL checks a package index URL.
func IndexURL(field, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return api.Errorf(api.CodeInvalid, field, "%s %q must be an http:// or https:// URL such as \"https://pypi.org/simple\"", field, raw)
	}
	return nil
}

// Interpreter checks python.python: a command name found on the node's PATH ("python3") or
// an absolute path.
func Interpreter(field, p string) error {
	if !interpreterRE.MatchString(p) || (strings.Contains(p, "/") && !strings.HasPrefix(p, "/")) {
		return api.Errorf(api.CodeInvalid, field, "%s %q must be a command name such as \"python3\" or an absolute path, without spaces", field, p)
	}
	return nil
}

// InterpreterPath checks user_managed.interpreter_path: an absolute, clean path.
func InterpreterPath(field, p string) error {
	if !strings.HasPrefix(p, "/") || path.Clean(p) != p || !interpreterRE.MatchString(p) || p == "/" {
		return api.Errorf(api.CodeInvalid, field, "%s %q must be an absolute path to an interpreter, such as \"/opt/conda/envs/x/bin/python\" (no spaces, no trailing '/', no '..')", field, p)
	}
	return nil
}

// imageRefRE is an image reference as registries and runtimes read it: an optional
// registry host (with a port), slash-separated lower-case path components, and a tag and/or
// a sha256 digest.
var imageRefRE = lazyregexp.New(`^(([a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?(\.[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)*|\[[0-9a-fA-F:]+\])(:[0-9]+)?/)?` +
	`[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*(/[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*)*` +
	`(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?$`)

// digestRE is a sha256 content digest.
var digestRE = lazyregexp.New(`^sha256:[0-9a-f]{64}$`)

// snapshotIDRE matches a snapshot's ID: the hex SHA-256 of its archive.
var snapshotIDRE = lazyregexp.New(`^[0-9a-f]{64}$`)

// ImageReference checks container.image.
func ImageReference(field, ref string) error {
	if len(ref) > 4096 || !imageRefRE.MatchString(ref) {
		return api.Errorf(api.CodeInvalid, field,
			"%s %q is not an image reference: write [registry[:port]/]name[:tag][@sha256:digest] with a lower-case name, such as \"registry.example.com/team/train:1.4\"", field, ref)
	}
	return nil
}

// ImageArchivePath checks container.image_archive: a path to a file, relative (to
// Terraform's working directory) or absolute.
func ImageArchivePath(field, p string) error {
	if strings.TrimSpace(p) == "" || strings.ContainsRune(p, 0) || strings.HasSuffix(p, "/") {
		return api.Errorf(api.CodeInvalid, field, "%s %q must be the path of an OCI or Docker image archive file, such as \"images/train.tar\" (docker save -o images/train.tar NAME)", field, p)
	}
	return nil
}

// EnvironmentDefinition checks an environment's definition: exactly one kind, and each of
// its fields.
func EnvironmentDefinition(py *api.PythonEnvironment, um *api.UserManagedEnvironment, c *api.ContainerEnvironment) error {
	kinds := 0
	for _, set := range []bool{py != nil, um != nil, c != nil} {
		if set {
			kinds++
		}
	}
	switch {
	case kinds == 0:
		return api.Errorf(api.CodeInvalid, "python", "an environment needs exactly one of python = { requirements = [...] } (built by the engine), user_managed = { interpreter_path = \"...\" } (your own interpreter) or container = { image = \"...\" } (a container image)")
	case kinds > 1:
		field := "user_managed"
		if c != nil {
			field = "container"
		}
		return api.Errorf(api.CodeInvalid, field, "an environment is exactly one of python (built by the engine), user_managed (your own interpreter) and container (a container image); remove all but one of them")
	case um != nil:
		return InterpreterPath("user_managed.interpreter_path", um.InterpreterPath)
	case c != nil:
		return containerDefinition(*c)
	}
	return pythonDefinition("python", *py)
}

// containerDefinition checks a container environment: exactly one of image and
// image_archive (the archive with the digest its client read), and the python on top.
func containerDefinition(c api.ContainerEnvironment) error {
	switch {
	case c.Image == "" && c.ImageArchive == "":
		return api.Errorf(api.CodeInvalid, "container", "a container environment needs exactly one of image = \"registry/name:tag\" (pulled on the node) or image_archive = \"path/to/image.tar\" (an OCI or Docker archive shipped to the node)")
	case c.Image != "" && c.ImageArchive != "":
		return api.Errorf(api.CodeInvalid, "container.image_archive", "a container environment is either image or image_archive, not both; remove one of them")
	case c.Image != "":
		if c.ImageDigest != "" {
			return api.Errorf(api.CodeInvalid, "container.image_digest", "container.image_digest is the digest read from an image_archive; an image reference pins its digest itself (name@sha256:...)")
		}
		if c.ImageSnapshot != "" {
			return api.Errorf(api.CodeInvalid, "container.image_snapshot", "container.image_snapshot is the uploaded image_archive; an image reference is pulled on the node instead")
		}
		if err := ImageReference("container.image", c.Image); err != nil {
			return err
		}
	default:
		if err := ImageArchivePath("container.image_archive", c.ImageArchive); err != nil {
			return err
		}
		if !digestRE.MatchString(c.ImageDigest) {
			return api.Errorf(api.CodeInvalid, "container.image_digest",
				"container.image_digest %q must be the sha256 digest of the archive's image config (\"sha256:\" and 64 hex digits), which the provider reads from container.image_archive at plan", c.ImageDigest)
		}
		if !snapshotIDRE.MatchString(c.ImageSnapshot) {
			return api.Errorf(api.CodeInvalid, "container.image_archive",
				"container.image_archive %q was not uploaded (image_snapshot %q): the client that names an archive uploads it first as a snapshot holding %s "+
					"(POST /v1/workspaces/{workspace}/snapshots) and sends the snapshot's ID as container.image_snapshot; the provider does this on apply",
				c.ImageArchive, c.ImageSnapshot, api.ImageArchiveFile)
		}
	}
	if c.Python != nil {
		return pythonDefinition("container.python", *c.Python)
	}
	return nil
}

// pythonDefinition checks a python block at field ("python", "container.python").
func pythonDefinition(field string, py api.PythonEnvironment) error {
	for i, r := range py.Requirements {
		if err := Requirement(indexed(field+".requirements", i), r); err != nil {
			return err
		}
	}
	for i, l := range py.FindLinks {
		if err := FindLink(indexed(field+".find_links", i), l); err != nil {
			return err
		}
	}
	if py.IndexURL != "" {
		if err := IndexURL(field+".index_url", py.IndexURL); err != nil {
			return err
		}
	}
	if py.Python != "" {
		if err := Interpreter(field+".python", py.Python); err != nil {
			return err
		}
	}
	return nil
}

// Environment checks a whole environment spec.
func Environment(spec api.EnvironmentSpec) error {
	if err := EnvironmentName.Check("name", spec.Name); err != nil {
		return err
	}
	return EnvironmentDefinition(spec.Python, spec.UserManaged, spec.Container)
}

// indexed is the field path of a list element ("python.requirements.0"), as the provider
// turns it into an attribute path.
func indexed(field string, i int) string {
	return fmt.Sprintf("%s.%d", field, i)
}
