package validation

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// This file checks what becomes a process: its argv and environment. A NUL byte cannot be
// passed to a process (the kernel takes C strings), and '=' in a name would split it into
// another variable, so both are refused before anything is stored. Errors name the field,
// never echo a value: environment values are often secrets.

// Command checks a command line; field is its path ("command"), elements are
// field.0, field.1, ... It does not require a non-empty command: callers say what they need.
func Command(field string, argv []string) error {
	for i, arg := range argv {
		if strings.IndexByte(arg, 0) >= 0 {
			return api.Errorf(api.CodeInvalid, field+"."+strconv.Itoa(i),
				"%s element %d contains a NUL byte, which a process argument cannot hold", field, i)
		}
	}
	return nil
}

// EnvVars checks environment variables; field is their path ("env"), a variable's is
// field.NAME. A name must be non-empty, without '=' or NUL; a value must be without NUL.
func EnvVars(field string, env map[string]string) error {
	for _, name := range slices.Sorted(maps.Keys(env)) {
		f := field + "." + name
		switch {
		case name == "":
			return api.Errorf(api.CodeInvalid, field, "an environment variable has an empty name")
		case strings.IndexByte(name, 0) >= 0:
			return api.Errorf(api.CodeInvalid, field, "environment variable name %q contains a NUL byte", name)
		case strings.Contains(name, "="):
			return api.Errorf(api.CodeInvalid, f, "environment variable name %q contains '=', which would end the name there", name)
		case strings.IndexByte(env[name], 0) >= 0:
			// The value is not shown: it may be a secret.
			return api.Errorf(api.CodeInvalid, f, "the value of environment variable %s contains a NUL byte, which a process environment cannot hold", name)
		}
	}
	return nil
}

// Job checks the parts of a job submission that become its processes: the command and the
// environment. The engine checks the rest (compute, counts, snapshot) when it queues it.
func Job(spec api.JobSpec) error {
	if err := Command("command", spec.Command); err != nil {
		return err
	}
	return EnvVars("env", spec.Env)
}

// hasControl reports whether s holds an ASCII control character (including CR, LF, TAB
// and DEL), which has no place in an HTTP path or header.
func hasControl(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0
}

// IdempotencyKey checks the Idempotency-Key header of a create: at most 255 printable
// ASCII characters without spaces (the client's keys are 32 hex digits). Empty means none.
func IdempotencyKey(key string) error {
	if len(key) > 255 {
		return api.Errorf(api.CodeInvalid, api.IdempotencyKeyHeader, "the %s header is %d bytes long; at most 255 are allowed", api.IdempotencyKeyHeader, len(key))
	}
	for i := 0; i < len(key); i++ {
		if key[i] <= 0x20 || key[i] >= 0x7f {
			return api.Errorf(api.CodeInvalid, api.IdempotencyKeyHeader, "the %s header may hold only printable ASCII characters without spaces; byte %d is %#02x", api.IdempotencyKeyHeader, i, key[i])
		}
	}
	return nil
}
