// Package version holds the release version, set at build time by goreleaser with
// -ldflags "-X github.com/mlcompute/terraform-provider-mlcompute/internal/version.Version=...".
package version

// Version is the release version; "dev" for local builds.
var Version = "dev"
