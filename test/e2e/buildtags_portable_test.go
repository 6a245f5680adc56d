//go:build unix && mlcompute_portable

package e2e

// goBuildTags are the tags the binaries under test are built with: this test binary was
// built with the portable process layer (make e2e-portable), so the engine under test runs
// it too.
var goBuildTags = []string{"-tags", "mlcompute_portable"}
