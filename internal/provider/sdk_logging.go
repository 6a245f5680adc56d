package provider

import (
	"strings"
)

// Environment variables that silence the plugin SDK's loggers (terraform-plugin-go's root
// and proto loggers, the framework's subsystem) and this provider's own logger.
var quietLogEnv = []string{"TF_LOG_SDK", "TF_LOG_SDK_PROTO", "TF_LOG_SDK_FRAMEWORK", "TF_LOG_PROVIDER_MLCOMPUTE"}

// QuietLogsUnlessAsked turns the provider's logging off when the user asked terraform for
// no logs: none of TF_LOG, TF_LOG_PROVIDER* or TF_LOG_SDK* is set. Without it the framework
// writes tens of kilobytes of trace lines per resource and call, which terraform parses and
// then throws away; on a plan of many resources that is a third of the time. With any of
// them set nothing changes, so `TF_LOG=trace terraform plan` shows every line as before.
//
// environ is the process environment (os.Environ) and setenv sets one variable
// (os.Setenv); it must run before the provider is served, which reads the levels once.
func QuietLogsUnlessAsked(environ []string, setenv func(key, value string) error) error {
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if value != "" && (name == "TF_LOG" || strings.HasPrefix(name, "TF_LOG_PROVIDER") || strings.HasPrefix(name, "TF_LOG_SDK")) {
			return nil
		}
	}
	for _, name := range quietLogEnv {
		if err := setenv(name, "OFF"); err != nil {
			return err
		}
	}
	return nil
}
