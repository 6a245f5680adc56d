//go:build unix && !mlcompute_portable

package e2e

// goBuildTags are the tags the binaries under test are built with (none: the platform's
// own process layer; buildtags_portable_test.go has the other case).
var goBuildTags []string
