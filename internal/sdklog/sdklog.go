// Package sdklog silences the plugin SDK's loggers when the user asked terraform for no
// logs. Both the provider and the benchmark's do-nothing provider use it, so that the
// benchmark's floor carries the same logging as the provider it is a floor for.
package sdklog

import (
	"strings"
)

// sdkLogEnv are the environment variables of the plugin SDK's loggers: terraform-plugin-go's
// root and proto loggers and the framework's subsystem.
var sdkLogEnv = []string{"TF_LOG_SDK", "TF_LOG_SDK_PROTO", "TF_LOG_SDK_FRAMEWORK"}

// QuietUnlessAsked turns the SDK's loggers and the provider's own (providerLogEnv, such as
// TF_LOG_PROVIDER_MLCOMPUTE) off when the user asked terraform for no logs: none of TF_LOG,
// TF_LOG_PROVIDER* or TF_LOG_SDK* is set. Without it the framework writes tens of kilobytes
// of trace lines per resource and call, which terraform parses and then throws away; on a
// plan of many resources that is a third of the time. With any of them set nothing
// changes, so `TF_LOG=trace terraform plan` shows every line as before.
//
// environ is the process environment (os.Environ) and setenv sets one variable
// (os.Setenv); it must run before the provider is served, which reads the levels once.
func QuietUnlessAsked(environ []string, setenv func(key, value string) error, providerLogEnv string) error {
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if value != "" && (name == "TF_LOG" || strings.HasPrefix(name, "TF_LOG_PROVIDER") || strings.HasPrefix(name, "TF_LOG_SDK")) {
			return nil
		}
	}
	for _, name := range append(append([]string(nil), sdkLogEnv...), providerLogEnv) {
		if err := setenv(name, "OFF"); err != nil {
			return err
		}
	}
	return nil
}
