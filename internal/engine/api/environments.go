package api

import "time"

// CollectionEnvironments is the collection name of environments in their IDs.
const CollectionEnvironments = "environments"

// DefaultPython is the interpreter a system-managed environment is built with when its spec
// names none.
const DefaultPython = "python3"

// PythonEnvironment is a system-managed environment: the engine builds a virtual
// environment from it on each node that needs it, once per content hash and machine.
type PythonEnvironment struct {
	// Requirements are pip requirement specifiers ("pkg==1.2").
	Requirements []string `json:"requirements,omitempty"`
	// FindLinks are directories (absolute paths on the node) or URLs pip looks for
	// distributions in. With FindLinks and no IndexURL, pip runs offline (--no-index).
	FindLinks []string `json:"find_links,omitempty"`
	// IndexURL replaces pip's default package index.
	IndexURL string `json:"index_url,omitempty"`
	// Python is the interpreter the virtual environment is made with (default python3).
	Python string `json:"python,omitempty"`
}

// UserManagedEnvironment is the user's own interpreter: nothing is installed, and the
// engine only checks that it exists on the node.
type UserManagedEnvironment struct {
	InterpreterPath string `json:"interpreter_path"`
}

// ContainerEnvironment is an environment whose jobs run in a container image: exactly one of
// Image and ImageArchive, and optionally a Python environment built on top of the image.
type ContainerEnvironment struct {
	// Image is an image reference ("registry/name:tag", or pinned "name@sha256:...").
	Image string `json:"image,omitempty"`
	// ImageArchive is the path of an OCI or Docker image archive, as the user wrote it.
	ImageArchive string `json:"image_archive,omitempty"`
	// ImageDigest is the digest of the archive's image config ("sha256:<hex>"), read from
	// the archive's manifest by the client that names the archive (the provider, at plan):
	// the engine never opens a path an API caller names. Required with ImageArchive.
	ImageDigest string `json:"image_digest,omitempty"`
	// ImageSnapshot is the ID of the snapshot (POST /v1/workspaces/{ws}/snapshots) that holds
	// the archive as ImageArchiveFile: the client that names the archive uploads it, and the
	// engine ships it to the node from there. Required with ImageArchive; not part of the
	// content hash (the digest is).
	ImageSnapshot string `json:"image_snapshot,omitempty"`
	// Python is built on top of the image, as a PythonEnvironment is on a node.
	Python *PythonEnvironment `json:"python,omitempty"`
}

// ImageArchiveFile is the name of the image archive in its snapshot.
const ImageArchiveFile = "image.tar"

// EnvironmentSpec is what a user declares for an environment: exactly one of Python,
// UserManaged and Container.
type EnvironmentSpec struct {
	Name        string                  `json:"name"`
	Python      *PythonEnvironment      `json:"python,omitempty"`
	UserManaged *UserManagedEnvironment `json:"user_managed,omitempty"`
	Container   *ContainerEnvironment   `json:"container,omitempty"`
}

// EnvironmentUpdate replaces an environment's definition (a new content hash).
type EnvironmentUpdate struct {
	Python      *PythonEnvironment      `json:"python,omitempty"`
	UserManaged *UserManagedEnvironment `json:"user_managed,omitempty"`
	Container   *ContainerEnvironment   `json:"container,omitempty"`
}

// Environment is an environment as the engine holds it.
type Environment struct {
	EnvironmentSpec
	ID        string `json:"id"`
	Workspace string `json:"workspace"`
	// ContentHash is a hash of the normalised definition: the same inputs give the same
	// hash, and a node's cached build is keyed by it.
	ContentHash string    `json:"content_hash"`
	CreatedOn   time.Time `json:"created_on"`
	UpdatedOn   time.Time `json:"updated_on"`
}

// EnvironmentList is the body of GET /v1/workspaces/{ws}/environments.
type EnvironmentList struct {
	Environments []Environment `json:"environments"`
}

// EnvironmentID is the ID of an environment.
func EnvironmentID(workspace, name string) string {
	return ID{Workspace: workspace, Collection: CollectionEnvironments, Name: name}.String()
}
