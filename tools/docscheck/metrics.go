package main

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/metrics"
)

const engineGuide = "docs/guides/engine.md"

// family is a metric family: its name and its variable labels.
type family struct {
	name   string
	labels []string
}

// emptySource satisfies every source interface of the metrics package, so that every
// collector the engine can register is registered.
type emptySource struct{}

func (emptySource) ListWorkspaces(context.Context) ([]api.Workspace, error)     { return nil, nil }
func (emptySource) ListComputes(context.Context, string) ([]api.Compute, error) { return nil, nil }
func (emptySource) ListJobs(context.Context, string) ([]api.Job, error)         { return nil, nil }
func (emptySource) ListEndpoints(context.Context, string) ([]api.Endpoint, error) {
	return nil, nil
}

// descRe reads a descriptor's name and variable labels from its String form, the only
// place client_golang shows them.
var descRe = regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)

func engineFamilies() ([]family, error) {
	m := metrics.New(metrics.Options{Source: emptySource{}})
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		m.Describe(ch)
		close(ch)
	}()
	var out []family
	for d := range ch {
		sm := descRe.FindStringSubmatch(d.String())
		if sm == nil {
			return nil, fmt.Errorf("cannot read the name and labels of %s", d)
		}
		f := family{name: sm[1]}
		for _, l := range strings.Split(sm[2], ",") {
			if l = strings.TrimSpace(l); l != "" {
				f.labels = append(f.labels, l)
			}
		}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// metricsTable returns the engine guide's metrics table, row by first cell, and the line
// of its header.
func metricsTable(lines []string) (rows map[string]struct {
	line int
	text string
}, header int) {
	rows = map[string]struct {
		line int
		text string
	}{}
	for i, l := range lines {
		if header == 0 && strings.HasPrefix(l, "| metric |") {
			header = i + 1
			continue
		}
		if header == 0 {
			continue
		}
		if !strings.HasPrefix(l, "|") {
			break
		}
		cells := strings.Split(l, "|")
		if len(cells) < 3 {
			continue
		}
		name := strings.Trim(strings.TrimSpace(cells[1]), "`")
		rows[name] = struct {
			line int
			text string
		}{i + 1, strings.Join(cells[2:], "|")}
	}
	return rows, header
}

func checkMetrics() ([]finding, error) {
	fams, err := engineFamilies()
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(engineGuide)
	if err != nil {
		return nil, err
	}
	rows, header := metricsTable(strings.Split(string(b), "\n"))
	if header == 0 {
		return []finding{{engineGuide, 1, "no metrics table (a table whose header starts with \"| metric |\")"}}, nil
	}
	var out []finding
	for _, f := range fams {
		row, ok := rows[f.name]
		if !ok {
			out = append(out, finding{engineGuide, header, fmt.Sprintf("the metrics table lacks %s (labels: %s)", f.name, strings.Join(f.labels, ", "))})
			continue
		}
		for _, l := range f.labels {
			if !strings.Contains(row.text, "`"+l+"`") {
				out = append(out, finding{engineGuide, row.line, fmt.Sprintf("the row of %s does not give its label `%s`", f.name, l)})
			}
		}
	}
	return out, nil
}
