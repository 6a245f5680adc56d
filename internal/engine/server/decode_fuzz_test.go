package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

// FuzzDecodeJSON feeds arbitrary bodies to the request decoder for every kind of body the
// API takes. It must never panic; a refusal is always an invalid API error; and a body it
// accepts is exactly one valid JSON value (whitespace aside) that decodes again to the
// same value.
func FuzzDecodeJSON(f *testing.F) {
	for _, seed := range []string{
		`{"name":"team-a"}`,
		`{"name":"team-a"} `,
		`{"name":"team-a"}{"name":"b"}`,
		`{"name":"team-a"} x`,
		`{"name":"team-a","colour":1}`,
		`{"compute":"cpu","command":["echo","a\u0000b"],"env":{"A=B":"c"}}`,
		`{"deployments":{"blue":{"instance_type":"Standard_DS3_v2","instance_count":1,"command":["serve"],"readiness_probe":{"path":"/r\r\n"}}}}`,
		`{"scale_settings":{"min_node_count":-1,"max_node_count":1e400}}`,
		`[1,2,3]`, `null`, ``, `{`, `{"tags":{"a":"\ud800"}}`,
	} {
		f.Add([]byte(seed))
	}
	targets := []func() any{
		func() any { return new(api.WorkspaceSpec) },
		func() any { return new(api.WorkspaceUpdate) },
		func() any { return new(api.ComputeSpec) },
		func() any { return new(api.ComputeUpdate) },
		func() any { return new(api.JobSpec) },
		func() any { return new(api.EndpointSpec) },
		func() any { return new(api.EndpointUpdate) },
		func() any { return new(api.RegenerateKeysRequest) },
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, newTarget := range targets {
			v := newTarget()
			err := decodeJSON(bytes.NewReader(body), v)
			if err != nil {
				var apiErr *api.Error
				if !errors.As(err, &apiErr) || apiErr.Code != api.CodeInvalid {
					t.Fatalf("decoding %q into %T: %v; want an invalid API error", body, v, err)
				}
				continue
			}
			if !json.Valid(body) {
				t.Fatalf("accepted %q into %T, which is not one valid JSON value", body, v)
			}
			again, err := json.Marshal(v)
			if err != nil {
				t.Fatalf("re-encoding %T: %v", v, err)
			}
			w := newTarget()
			if err := decodeJSON(bytes.NewReader(again), w); err != nil {
				t.Fatalf("%T re-encoded as %s does not decode again: %v", v, again, err)
			}
			if back, _ := json.Marshal(w); !bytes.Equal(back, again) {
				t.Fatalf("%T does not round-trip: %s then %s", v, again, back)
			}
		}
	})
}

// FuzzJobValidation checks what the API lets through to a process: an accepted job has
// no NUL anywhere in its command or environment and no '=' in a variable's name, and a
// refusal never repeats an environment value.
func FuzzJobValidation(f *testing.F) {
	f.Add("echo", "hi", "NAME", "value")
	f.Add("echo", "a\x00b", "NAME", "value")
	f.Add("env", "", "A=B", "c")
	f.Add("env", "", "TOKEN", "secret\x00tail")
	f.Add("env", "", "", "x")
	f.Fuzz(func(t *testing.T, arg0, arg1, name, value string) {
		spec := api.JobSpec{Command: []string{arg0, arg1}, Env: map[string]string{name: value}}
		err := validation.Job(spec)
		bad := strings.ContainsRune(arg0, 0) || strings.ContainsRune(arg1, 0) || name == "" ||
			strings.ContainsAny(name, "=\x00") || strings.ContainsRune(value, 0)
		if bad != (err != nil) {
			t.Fatalf("Job(%+v) = %v; want refused: %v", spec, err, bad)
		}
		if err == nil {
			return
		}
		// The refusal must not depend on the value beyond whether it holds a NUL: it
		// never shows the value.
		placeholder := "x"
		if strings.ContainsRune(value, 0) {
			placeholder = "x\x00"
		}
		other := api.JobSpec{Command: spec.Command, Env: map[string]string{name: placeholder}}
		if err2 := validation.Job(other); err2 == nil || err2.Error() != err.Error() {
			t.Fatalf("refusal %q depends on the value (with a placeholder: %v)", err, err2)
		}
	})
}
