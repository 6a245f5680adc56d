// Command docscheck holds the documentation to the code it describes. It is run by
// `make docs-check` (scripts/docs.sh check) after docs/ is regenerated, and fails with one
// line per finding, "file:line: what is missing":
//
//   - every mlcompute command line in docs/, README.md and examples/ parses against the
//     CLI's command tree (the command exists, and so do its flags);
//   - every command and flag of that tree appears in docs/guides/cli.md, hidden ones on a
//     line that says they are hidden;
//   - every MLCOMPUTE_ environment variable the code reads (os.Getenv, os.LookupEnv) is
//     named somewhere in docs/;
//   - every metric family the engine registers, with each of its labels, is in the engine
//     guide's metrics table;
//   - no line speaks of a feature whose command the CLI lacks (port forwards without
//     `mlcompute compute connect`).
package main

import (
	"flag"
	"fmt"
	"os"
	"sort"
)

// finding is one thing the docs lack or get wrong.
type finding struct {
	file string
	line int
	msg  string
}

func (f finding) String() string { return fmt.Sprintf("%s:%d: %s", f.file, f.line, f.msg) }

func main() {
	root := flag.String("root", ".", "the repository's root directory")
	flag.Parse()
	if err := os.Chdir(*root); err != nil {
		fmt.Fprintln(os.Stderr, "docscheck:", err)
		os.Exit(2)
	}
	checks := []struct {
		name string
		run  func() ([]finding, error)
	}{
		{"command lines parse against the CLI", checkCommandLines},
		{"the CLI's commands and flags are in docs/guides/cli.md", checkCLICoverage},
		{"MLCOMPUTE_ environment variables are documented", checkEnvVars},
		{"metric families are in the engine guide's metrics table", checkMetrics},
		{"the docs promise no feature the CLI lacks", checkPromises},
	}
	failed := false
	for _, c := range checks {
		fs, err := c.run()
		if err != nil {
			fmt.Fprintf(os.Stderr, "docscheck: %s: %v\n", c.name, err)
			failed = true
			continue
		}
		sort.SliceStable(fs, func(i, j int) bool {
			if fs[i].file != fs[j].file {
				return fs[i].file < fs[j].file
			}
			return fs[i].line < fs[j].line
		})
		for _, f := range fs {
			fmt.Fprintln(os.Stderr, f)
		}
		if len(fs) > 0 {
			fmt.Fprintf(os.Stderr, "docscheck: %s: %d finding(s)\n", c.name, len(fs))
			failed = true
		} else {
			fmt.Printf("docscheck: %s: ok\n", c.name)
		}
	}
	if failed {
		os.Exit(1)
	}
}
