// Package artifactstest writes the trees the store's benchmarks take in.
package artifactstest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// WriteRandomTree writes files files of random content (never two alike), together about
// total bytes, in 100 directories of two levels under root. The same arguments write the
// same tree.
func WriteRandomTree(root string, files int, total int64) error {
	if files <= 0 || total < int64(files) {
		return fmt.Errorf("writing a tree: want at least one file and one byte per file, not %d files of %d bytes", files, total)
	}
	chacha := rand.NewChaCha8([32]byte{1})
	rng := rand.New(chacha)
	each := total / int64(files)
	buf := make([]byte, each+each/2)
	for i := range files {
		size := each/2 + rng.Int64N(each+1) // mean each
		_, _ = chacha.Read(buf[:size])
		p := filepath.Join(root, fmt.Sprintf("d%02d", i%10), fmt.Sprintf("e%02d", i/10%10), fmt.Sprintf("f%05d.bin", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, buf[:size], 0o644); err != nil {
			return err
		}
	}
	return nil
}
