// Command kube is kube-apiserver, kubelet, kube-scheduler and kubectl in one binary, for the
// single-node cluster of `make kube-up` (scripts/kube.sh). It picks the component from the
// name it is run as (a symlink named kubectl, say) or else from its first argument:
//
//	kube kube-apiserver --etcd-servers=...
//	kubectl get pods        (through a symlink named kubectl)
//
// One binary links the shared Kubernetes packages once: a cold build is the slow part of the
// first `make kube-up`, and the build cache it fills is shared by the four components.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	_ "time/tzdata" // kube-apiserver: time zones for CronJob, as its own main imports

	"github.com/spf13/cobra"
	_ "k8s.io/client-go/plugin/pkg/client/auth" // kubectl: client auth plugins, as its own main imports
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"          // the JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // the version metric
	kubectl "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

const usage = "usage: kube {kube-apiserver|kubelet|kube-scheduler|kubectl} [args...] (or run it through a symlink of that name)"

func main() {
	name := filepath.Base(os.Args[0])
	args := os.Args[1:]
	if !isComponent(name) {
		if len(args) == 0 || !isComponent(args[0]) {
			fmt.Fprintln(os.Stderr, usage)
			os.Exit(2)
		}
		name, args = args[0], args[1:]
	}
	// The components parse os.Args themselves (cobra and klog), so they see only their own.
	os.Args = append([]string{name}, args...)

	var command *cobra.Command
	switch name {
	case "kube-apiserver":
		command = apiserver.NewAPIServerCommand()
	case "kubelet":
		command = kubelet.NewKubeletCommand(context.Background())
	case "kube-scheduler":
		command = scheduler.NewSchedulerCommand()
	case "kubectl":
		runKubectl()
		return
	}
	os.Exit(cli.Run(command))
}

// runKubectl is kubectl's own main: its verbosity is set before the command is built, and
// errors print the way kubectl prints them.
func runKubectl() {
	logs.GlogSetter(kubectl.GetLogVerbosity(os.Args)) //nolint:errcheck // as kubectl's main
	command := kubectl.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		kubectlutil.CheckErr(err)
	}
}

func isComponent(name string) bool {
	switch name {
	case "kube-apiserver", "kubelet", "kube-scheduler", "kubectl":
		return true
	}
	return false
}
