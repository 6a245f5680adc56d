package sdklog

import (
	"maps"
	"slices"
	"testing"
)

func TestQuietUnlessAsked(t *testing.T) {
	allOff := map[string]string{"TF_LOG_PROVIDER_MLCOMPUTE": "OFF"}
	for _, name := range sdkLogEnv {
		allOff[name] = "OFF"
	}
	for _, tc := range []struct {
		name    string
		environ []string
		want    map[string]string
	}{
		{"no logging asked", []string{"PATH=/bin", "TF_LOG_PATH=/tmp/tf.log", "TF_LOG_CORE_X="}, allOff},
		{"empty TF_LOG", []string{"TF_LOG="}, allOff},
		{"TF_LOG", []string{"TF_LOG=trace"}, map[string]string{}},
		{"TF_LOG_PROVIDER", []string{"TF_LOG_PROVIDER=debug"}, map[string]string{}},
		{"TF_LOG_PROVIDER_MLCOMPUTE", []string{"TF_LOG_PROVIDER_MLCOMPUTE=info"}, map[string]string{}},
		{"TF_LOG_SDK", []string{"TF_LOG_SDK=trace"}, map[string]string{}},
		{"TF_LOG_SDK_FRAMEWORK", []string{"TF_LOG_SDK_FRAMEWORK=debug"}, map[string]string{}},
		{"TF_LOG_SDK_PROTO", []string{"TF_LOG_SDK_PROTO=trace"}, map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]string{}
			if err := QuietUnlessAsked(tc.environ, func(k, v string) error { got[k] = v; return nil }, "TF_LOG_PROVIDER_MLCOMPUTE"); err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("set %v, want %v", got, tc.want)
			}
		})
	}
	if !slices.Contains(sdkLogEnv, "TF_LOG_SDK_FRAMEWORK") {
		t.Error("the framework's subsystem logger is not silenced")
	}
}
