package server_test

import (
	_ "embed"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/server"
)

//go:embed openapi.yaml
var openapiYAML []byte

type openapiDoc struct {
	Paths      map[string]map[string]yaml.Node `yaml:"paths"`
	Components struct {
		Schemas map[string]struct {
			Properties map[string]any `yaml:"properties"`
			Enum       []string       `yaml:"enum"`
			// AllOf holds the $refs of the schemas an object embeds.
			AllOf []struct {
				Ref string `yaml:"$ref"`
			} `yaml:"allOf"`
		} `yaml:"schemas"`
	} `yaml:"components"`
}

func loadOpenAPI(t *testing.T) openapiDoc {
	t.Helper()
	var doc openapiDoc
	if err := yaml.Unmarshal(openapiYAML, &doc); err != nil {
		t.Fatalf("openapi.yaml does not parse: %v", err)
	}
	return doc
}

// TestOpenAPIMatchesRoutes fails when a route is served but not documented, or documented
// but not served.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	doc := loadOpenAPI(t)
	var documented, served []string
	for path, ops := range doc.Paths {
		for method := range ops {
			if method == "parameters" {
				continue
			}
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	for _, r := range server.Routes {
		served = append(served, r.Method+" "+r.Path)
	}
	sort.Strings(documented)
	sort.Strings(served)
	if !slices.Equal(documented, served) {
		t.Fatalf("openapi.yaml and server.Routes differ\ndocumented: %v\nserved:     %v", documented, served)
	}
}

// TestOpenAPIErrorCodes keeps the documented error codes equal to the API's codes.
func TestOpenAPIErrorCodes(t *testing.T) {
	var raw struct {
		Components struct {
			Schemas struct {
				Error struct {
					Properties struct {
						Code struct {
							Enum []string `yaml:"enum"`
						} `yaml:"code"`
					} `yaml:"properties"`
				} `yaml:"Error"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(openapiYAML, &raw); err != nil {
		t.Fatal(err)
	}
	var codes []string
	for _, c := range api.Codes() {
		codes = append(codes, string(c))
	}
	if got := raw.Components.Schemas.Error.Properties.Code.Enum; !slices.Equal(got, codes) {
		t.Fatalf("documented codes %v; api.Codes() %v", got, codes)
	}
}

// TestOpenAPISchemasMatchWireTypes checks each documented object's properties against the
// JSON field names of its Go wire type.
func TestOpenAPISchemasMatchWireTypes(t *testing.T) {
	doc := loadOpenAPI(t)
	for name, v := range map[string]any{
		"Status":                 api.Status{},
		"WorkspaceSpec":          api.WorkspaceSpec{},
		"WorkspaceUpdate":        api.WorkspaceUpdate{},
		"VMSize":                 api.VMSize{},
		"Error":                  api.Error{},
		"ScaleSettings":          api.ScaleSettings{},
		"ComputeSpec":            api.ComputeSpec{},
		"ComputeUpdate":          api.ComputeUpdate{},
		"Node":                   api.Node{},
		"Compute":                api.Compute{},
		"JobSpec":                api.JobSpec{},
		"PipelineSpec":           api.PipelineSpec{},
		"PipelineStepSpec":       api.PipelineStepSpec{},
		"PipelineStep":           api.PipelineStep{},
		"ReuseKeyParts":          api.ReuseKeyParts{},
		"RerunRequest":           api.RerunRequest{},
		"Job":                    api.Job{},
		"LogChunk":               api.LogChunk{},
		"SnapshotRef":            api.SnapshotRef{},
		"InstanceSettings":       api.InstanceSettings{},
		"Schedule":               api.Schedule{},
		"SetupScript":            api.SetupScript{},
		"Operation":              api.Operation{},
		"Probe":                  api.Probe{},
		"RequestSettings":        api.RequestSettings{},
		"DeploymentSpec":         api.DeploymentSpec{},
		"EndpointSpec":           api.EndpointSpec{},
		"EndpointUpdate":         api.EndpointUpdate{},
		"EndpointInstance":       api.EndpointInstance{},
		"Deployment":             api.Deployment{},
		"Endpoint":               api.Endpoint{},
		"EndpointList":           api.EndpointList{},
		"EndpointKeys":           api.EndpointKeys{},
		"EndpointToken":          api.EndpointToken{},
		"RegenerateKeysRequest":  api.RegenerateKeysRequest{},
		"QuotaCheck":             api.QuotaCheck{},
		"PythonEnvironment":      api.PythonEnvironment{},
		"UserManagedEnvironment": api.UserManagedEnvironment{},
		"ContainerEnvironment":   api.ContainerEnvironment{},
		"EnvironmentSpec":        api.EnvironmentSpec{},
		"EnvironmentUpdate":      api.EnvironmentUpdate{},
		"Environment":            api.Environment{},
		"EnvironmentList":        api.EnvironmentList{},
		"History":                api.History{},
		"ComputeHistory":         api.ComputeHistory{},
		"ComputeSample":          api.ComputeSample{},
		"DeploymentHistory":      api.DeploymentHistory{},
		"DeploymentSample":       api.DeploymentSample{},
		"JobScheduleTrigger":     api.JobScheduleTrigger{},
		"RecurrenceSchedule":     api.RecurrenceSchedule{},
		"JobScheduleSpec":        api.JobScheduleSpec{},
		"JobScheduleUpdate":      api.JobScheduleUpdate{},
		"ScheduleSkip":           api.ScheduleSkip{},
		"JobSchedule":            api.JobSchedule{},
		"JobScheduleList":        api.JobScheduleList{},
		"TokenSpec":              api.TokenSpec{},
		"Token":                  api.Token{},
		"TokenCreated":           api.TokenCreated{},
		"TokenList":              api.TokenList{},
		"AuditEntry":             api.AuditEntry{},
		"AuditList":              api.AuditList{},
	} {
		schema, ok := doc.Components.Schemas[name]
		if !ok {
			t.Errorf("schema %s is not documented", name)
			continue
		}
		var documented []string
		for p := range schema.Properties {
			documented = append(documented, p)
		}
		// An embedded Go struct is documented as allOf the embedded type's schema.
		for _, ref := range schema.AllOf {
			for p := range doc.Components.Schemas[strings.TrimPrefix(ref.Ref, "#/components/schemas/")].Properties {
				documented = append(documented, p)
			}
		}
		sort.Strings(documented)
		if fields := jsonFields(reflect.TypeOf(v)); !slices.Equal(documented, fields) {
			t.Errorf("schema %s documents %v; the Go type has %v", name, documented, fields)
		}
	}
}

func jsonFields(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Tag.Get("json") == "" && f.Type.Kind() == reflect.Struct {
			// encoding/json promotes an untagged embedded struct's fields.
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "" || name == "-" {
			continue
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// TestOpenAPIPermissions holds each operation's documented x-permission to the permission
// the server's route table checks.
func TestOpenAPIPermissions(t *testing.T) {
	doc := loadOpenAPI(t)
	for _, r := range server.Routes {
		node, ok := doc.Paths[r.Path][strings.ToLower(r.Method)]
		if !ok {
			continue // TestOpenAPIMatchesRoutes reports it
		}
		var op struct {
			Permission string `yaml:"x-permission"`
		}
		if err := node.Decode(&op); err != nil {
			t.Fatal(err)
		}
		if op.Permission != r.Permission() {
			t.Errorf("%s %s: openapi.yaml documents x-permission %q; the server checks %q", r.Method, r.Path, op.Permission, r.Permission())
		}
	}
}
