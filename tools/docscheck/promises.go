package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// promise is a feature the docs may speak of only once the CLI has the command that gives
// it: DESIGN lets port forwards be mentioned only if `mlcompute compute connect --port` is
// built, and a doc that promised them while no such command existed once reached users.
type promise struct {
	phrases []string // lower case, as the docs may write the feature
	command []string // the command path under mlcompute that provides it
}

var promises = []promise{
	{phrases: []string{"port forward", "port-forward"}, command: []string{"compute", "connect"}},
}

// checkPromises finds the lines of docs/, README.md and examples/ that speak of a feature
// whose command the CLI lacks.
func checkPromises() ([]finding, error) {
	files, err := docFiles()
	if err != nil {
		return nil, err
	}
	texts := map[string]string{}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		texts[file] = string(b)
	}
	return unkeptPromises(newCLI(), texts, promises), nil
}

// unkeptPromises is checkPromises on given texts (file name to content).
func unkeptPromises(root *cobra.Command, texts map[string]string, ps []promise) []finding {
	var out []finding
	for _, p := range ps {
		if c, rest, err := root.Find(p.command); err == nil && len(rest) == 0 && c != root {
			continue // the command exists: the docs may speak of it
		}
		for file, text := range texts {
			for i, line := range strings.Split(text, "\n") {
				lower := strings.ToLower(line)
				for _, phrase := range p.phrases {
					if strings.Contains(lower, phrase) {
						out = append(out, finding{file, i + 1, fmt.Sprintf("speaks of %q, but the CLI has no `mlcompute %s`",
							phrase, strings.Join(p.command, " "))})
						break
					}
				}
			}
		}
	}
	return out
}
