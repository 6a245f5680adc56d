package metrics

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// dashboardFile is the Grafana dashboard of examples/monitoring.
var dashboardFile = filepath.Join("..", "..", "..", "examples", "monitoring", "dashboard.json")

// everySource satisfies every source interface of this package, so every collector the
// engine can register is registered.
type everySource struct{}

func (everySource) ListWorkspaces(context.Context) ([]api.Workspace, error)       { return nil, nil }
func (everySource) ListComputes(context.Context, string) ([]api.Compute, error)   { return nil, nil }
func (everySource) ListJobs(context.Context, string) ([]api.Job, error)           { return nil, nil }
func (everySource) ListEndpoints(context.Context, string) ([]api.Endpoint, error) { return nil, nil }
func (everySource) ArtifactUsage() (int64, int)                                   { return 0, 0 }

var descRe = regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)

// exportedNames are the series names the engine's registry exports, with their labels:
// each family of the engine's own collectors (a histogram's as _bucket, with le, _sum and
// _count), and the families the registry gathers besides (the Go runtime's and the
// process's). Every series also gets the job and instance labels of its scrape.
func exportedNames(t *testing.T) map[string][]string {
	m := New(Options{Source: everySource{}})
	names := map[string][]string{}
	for _, c := range m.own {
		_, histogram := c.(*prometheus.HistogramVec)
		if _, ok := c.(prometheus.Histogram); ok {
			histogram = true
		}
		ch := make(chan *prometheus.Desc, 16)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			sm := descRe.FindStringSubmatch(d.String())
			if sm == nil {
				t.Fatalf("cannot read the name and labels of %s", d)
			}
			labels := []string{"job", "instance"}
			for _, l := range strings.Split(sm[2], ",") {
				if l = strings.TrimSpace(l); l != "" {
					labels = append(labels, l)
				}
			}
			if histogram {
				names[sm[1]+"_bucket"] = append(slices.Clone(labels), "le")
				names[sm[1]+"_sum"], names[sm[1]+"_count"] = labels, labels
			} else {
				names[sm[1]] = labels
			}
		}
	}
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if _, ok := names[f.GetName()]; !ok {
			labels := []string{"job", "instance"}
			for _, l := range f.GetMetric()[0].GetLabel() {
				labels = append(labels, l.GetName())
			}
			names[f.GetName()] = labels
		}
	}
	return names
}

// exprs returns every "expr" and every query variable's "query" in a dashboard, with where
// it is.
func exprs(v any, path string, out map[string]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, child := range x {
			switch s, ok := child.(string); {
			case ok && k == "expr":
				out[path+"."+k] = s
			case ok && k == "query" && strings.HasPrefix(path, "templating"):
				out[path+"."+k] = s
			case ok && k == "definition":
			default:
				exprs(child, path+"."+k, out)
			}
		}
	case []any:
		for i, child := range x {
			exprs(child, path+"["+strconv.Itoa(i)+"]", out)
		}
	}
}

// promqlWords are PromQL's functions, aggregations and keywords the dashboard may use, and
// Grafana's query functions of its variables.
var promqlWords = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "count": true, "topk": true, "bottomk": true, "quantile": true,
	"rate": true, "irate": true, "increase": true, "delta": true, "deriv": true, "histogram_quantile": true,
	"clamp_min": true, "clamp_max": true, "abs": true, "vector": true, "scalar": true, "sort_desc": true,
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"and": true, "or": true, "unless": true, "bool": true, "offset": true, "label_values": true,
}

var (
	promqlLabelUse  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)`)
	promqlGroupList = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
	labelValuesArg  = regexp.MustCompile(`^\s*label_values\(.*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$`)
	promqlStrings   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promqlMatchers  = regexp.MustCompile(`\{[^}]*\}`)
	promqlRanges    = regexp.MustCompile(`\[[^\]]*\]`)
	promqlGrouping  = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	grafanaVars     = regexp.MustCompile(`\$\{[^}]*\}|\$\w+`)
	promqlNumbers   = regexp.MustCompile(`\b\d+(\.\d+)?\b`)
	promqlIdentifer = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
)

// metricNames returns the metric names a PromQL expression (or a Grafana label_values
// query) reads: the identifiers left once strings, label matchers, ranges, grouping
// labels, Grafana's variables, numbers and PromQL's own words are taken out. A label
// named as label_values' second argument is dropped too.
func metricNames(expr string) []string {
	e := promqlStrings.ReplaceAllString(expr, " ")
	e = promqlMatchers.ReplaceAllString(e, " ")
	e = promqlRanges.ReplaceAllString(e, " ")
	e = promqlGrouping.ReplaceAllString(e, " ")
	e = grafanaVars.ReplaceAllString(e, " ")
	e = promqlNumbers.ReplaceAllString(e, " ")
	if rest, ok := strings.CutPrefix(strings.TrimSpace(e), "label_values("); ok {
		metric, _, _ := strings.Cut(rest, ",")
		e = metric
	}
	var out []string
	for _, id := range promqlIdentifer.FindAllString(e, -1) {
		if !promqlWords[id] {
			out = append(out, id)
		}
	}
	return out
}

// labelNames returns the labels a PromQL expression matches on or groups by (on, ignoring
// and group_* name the labels of both sides; the dashboard uses none), and the label of a
// label_values query.
func labelNames(expr string) []string {
	e := promqlStrings.ReplaceAllString(expr, `""`)
	var out []string
	for _, m := range promqlLabelUse.FindAllStringSubmatch(e, -1) {
		out = append(out, m[1])
	}
	for _, m := range promqlGroupList.FindAllStringSubmatch(e, -1) {
		for _, l := range strings.Split(m[1], ",") {
			if l = strings.TrimSpace(l); l != "" {
				out = append(out, l)
			}
		}
	}
	if m := labelValuesArg.FindStringSubmatch(e); m != nil {
		out = append(out, m[1])
	}
	return out
}

func TestMetricNamesOfPromQL(t *testing.T) {
	for expr, want := range map[string][]string{
		`sum by (compute, state) (mlcompute_nodes{workspace=~"$workspace", compute=~"a|b"})`:                  {"mlcompute_nodes"},
		`histogram_quantile(0.9, sum by (le) (rate(mlcompute_x_bucket{code=~"5.."}[$__rate_interval]))) * 60`: {"mlcompute_x_bucket"},
		`label_values(mlcompute_nodes{workspace=~"$workspace"}, compute)`:                                     {"mlcompute_nodes"},
		`a_total / on (job) b_total or vector(0)`:                                                             {"a_total", "b_total"},
	} {
		if got := metricNames(expr); !slices.Equal(got, want) {
			t.Errorf("metricNames(%q) = %v; want %v", expr, got, want)
		}
	}
	for expr, want := range map[string][]string{
		`sum by (compute, state) (mlcompute_nodes{workspace=~"$workspace", compute!="a=b"})`: {"workspace", "compute", "compute", "state"},
		`label_values(mlcompute_nodes{workspace=~"$workspace"}, compute)`:                    {"workspace", "compute"},
	} {
		if got := labelNames(expr); !slices.Equal(got, want) {
			t.Errorf("labelNames(%q) = %v; want %v", expr, got, want)
		}
	}
}

// Every metric the Grafana dashboard of examples/monitoring queries is one the engine
// exports, with the labels spelled as the families have them.
func TestDashboardQueriesOnlyExportedMetrics(t *testing.T) {
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash map[string]any
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("%s is not JSON: %v", dashboardFile, err)
	}
	found := map[string]string{}
	exprs(dash, "", found)
	if len(found) < 10 {
		t.Fatalf("found %d queries in the dashboard; want its every panel's", len(found))
	}
	exported := exportedNames(t)
	used := map[string]bool{}
	for where, expr := range found {
		names := metricNames(expr)
		if len(names) == 0 {
			t.Errorf("%s: %q reads no metric", where, expr)
		}
		var labels []string
		for _, name := range names {
			used[name] = true
			if _, ok := exported[name]; !ok {
				t.Errorf("%s: %q queries %s, which the engine does not export", where, expr, name)
			}
			labels = append(labels, exported[name]...)
		}
		for _, l := range labelNames(expr) {
			if !slices.Contains(labels, l) {
				t.Errorf("%s: %q uses label %s, which none of %v has (labels: %v)", where, expr, l, names, labels)
			}
		}
	}
	t.Logf("%d queries over %d metric names", len(found), len(used))
}
